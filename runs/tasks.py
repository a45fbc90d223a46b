"""django-q2 task entry points of the run machinery (run in `manage.py qcluster` worker processes).

Every function takes plain arguments (an org slug, a run id), acts for the org only inside
`tenancy.stores.org_context(slug)`, and is safe to run twice: the queue may deliver a task
again after its worker died (ORM broker) and the sweep may hand a queued run over again.
Tasks queued before these moved here name them `agents.tasks.…`; that module re-exports them.
"""

from __future__ import annotations

import logging

from tenancy import stores
from runs.reaper import sessions_reap
from runs.recovery import runs_recover
from runs.sweeps import org_sweeps_run
from runs.background import run_execute_queued
from runs.approvals import resume_answered

logger = logging.getLogger(__name__)


def sweep() -> dict:
    """Recover lost runs and end expired sessions (schedule `agents: sweep`, every minute).

    Returns `{"lost": n, "redispatched": n, "neverStarted": n, "charged": n, "reaped": n, …}` plus one count
    per registered sweeper (`runs.sweeps`: `routedExpired` of targets, `approvalsExpired` of
    the runs waiting for approval past `AGENTS_APPROVAL_TIMEOUT_SECONDS`).
    """
    recovered = runs_recover()
    reaped = sessions_reap()
    return {
        "lost": len(recovered.lost),
        "redispatched": len(recovered.redispatched),
        "neverStarted": len(recovered.never_started),
        "charged": len(recovered.charged),
        "reaped": len(reaped),
        **org_sweeps_run(),
    }


def recover_runs() -> dict:
    """Finish the runs of dead workers now (enqueued when a worker process starts)."""
    recovered = runs_recover()
    return {"lost": len(recovered.lost), "redispatched": len(recovered.redispatched)}


def execute_run(org: str, run_id: str) -> str:
    """Execute queued run `run_id` of org `org` through the one run path; return its status.

    A run that is no longer queued (cancelled, finished, or taken by another worker) is left
    alone; if it is `running` with a dead worker it is finished "worker lost" on the spot.
    """
    with stores.org_context(org, create=False):
        return run_execute_queued(run_id=run_id)


def resume_run(org: str, run_id: str) -> str:
    """Resume run `run_id` of org `org` whose approvals are all answered (issue 28); return its status.

    Queued by the last answer (and again by the sweep if lost). A run no longer waiting, or
    still waiting for an answer, is left alone: two deliveries resume it once.
    """
    with stores.org_context(org, create=False):
        return resume_answered(run_id=run_id)  # its kind's RunPolicy.resume (agents.execution.resume.run_resume)
