"""django-q2 task entry points of the agents app (run in `manage.py qcluster` worker processes).

The run machinery's tasks are `runs.tasks`; their old dotted paths (`agents.tasks.execute_run`,
`resume_run`, `recover_runs`, `sweep`) stay importable here, so tasks and schedules queued before
the move still run.

Every function takes plain arguments (an org slug, a run id), acts for the org only inside
`tenancy.stores.org_context(slug)`, and is safe to run twice: the queue may deliver a task
again after its worker died (ORM broker) and the sweep may hand a queued run over again.
"""

from __future__ import annotations

import logging

from runs.tasks import execute_run, recover_runs, resume_run, sweep  # noqa: F401  (queued under these names)
from agents.scheduling.ticker import scheduler_tick as tick

logger = logging.getLogger(__name__)

#: This app's django-q2 schedules, name → (task, cron): `manage.py ensure_schedules` (the composition root)
#: installs them. Both tick every minute; their work is idempotent.
SCHEDULES = {
    "agents: scheduler tick": ("agents.tasks.scheduler_tick", "* * * * *"),
    "agents: sweep": ("runs.tasks.sweep", "* * * * *"),
}


def scheduler_tick() -> dict:
    """Decide every due slot of every long-running agent (schedule `agents: scheduler tick`).

    Returns counts per outcome, e.g. `{"fired": 2, "busy": 1, "failedOrgs": 0}` (stored by
    django-q2 as the task's result).
    """
    report = tick()
    counts: dict = {}
    for decision in report.decisions:
        counts[decision.outcome] = counts.get(decision.outcome, 0) + 1
    counts["failedOrgs"] = len(report.failed_orgs)
    return counts
