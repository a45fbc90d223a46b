"""django-q2 task entry points (run in `manage.py qcluster` worker processes).

Every function takes plain arguments (an org slug, a run id), acts for the org only inside
`tenancy.stores.org_context(slug)`, and is safe to run twice: the queue may deliver a task
again after its worker died (ORM broker) and the sweep may hand a queued run over again.
"""

from __future__ import annotations

import logging

from tenancy import stores

logger = logging.getLogger(__name__)


def scheduler_tick() -> dict:
    """Decide every due slot of every long-running agent (schedule `agents: scheduler tick`).

    Returns counts per outcome, e.g. `{"fired": 2, "busy": 1, "failedOrgs": 0}` (stored by
    django-q2 as the task's result).
    """
    from agents.scheduling.ticker import scheduler_tick as tick

    report = tick()
    counts: dict = {}
    for decision in report.decisions:
        counts[decision.outcome] = counts.get(decision.outcome, 0) + 1
    counts["failedOrgs"] = len(report.failed_orgs)
    return counts


def sweep() -> dict:
    """Recover lost runs and end expired sessions (schedule `agents: sweep`, every minute).

    Returns `{"lost": n, "redispatched": n, "neverStarted": n, "reaped": n, …}` plus one count
    per registered sweeper (`agents.sweeps`: `routedExpired` of targets, `approvalsExpired` of
    the runs waiting for approval past `AGENTS_APPROVAL_TIMEOUT_SECONDS`).
    """
    from agents.reaper import sessions_reap
    from agents.recovery import runs_recover
    from agents.sweeps import org_sweeps_run

    recovered = runs_recover()
    reaped = sessions_reap()
    return {
        "lost": len(recovered.lost),
        "redispatched": len(recovered.redispatched),
        "neverStarted": len(recovered.never_started),
        "reaped": len(reaped),
        **org_sweeps_run(),
    }


def recover_runs() -> dict:
    """Finish the runs of dead workers now (enqueued when a worker process starts)."""
    from agents.recovery import runs_recover

    recovered = runs_recover()
    return {"lost": len(recovered.lost), "redispatched": len(recovered.redispatched)}


def execute_run(org: str, run_id: str) -> str:
    """Execute queued run `run_id` of org `org` through the one run path; return its status.

    A run that is no longer queued (cancelled, finished, or taken by another worker) is left
    alone; if it is `running` with a dead worker it is finished "worker lost" on the spot.
    """
    from agents.background import run_execute_queued

    with stores.org_context(org, create=False):
        return run_execute_queued(run_id=run_id)


def resume_run(org: str, run_id: str) -> str:
    """Resume run `run_id` of org `org` whose approvals are all answered (issue 28); return its status.

    Queued by the last answer (and again by the sweep if lost). A run no longer waiting, or
    still waiting for an answer, is left alone: two deliveries resume it once.
    """
    from agents.execution.resume import run_resume

    with stores.org_context(org, create=False):
        return run_resume(run_id=run_id)
