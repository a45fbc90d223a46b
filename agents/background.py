"""Queued runs: record, hand to django-q2, claim in a worker, keep a lease, cancel.

A background run (spec 003: `POST /v1/agents/{ref}/run` with `"background": true`) and a
scheduled run are both recorded `queued` with a `RunTask`, handed to the task queue once the
recording transaction commits, and executed by a worker through the one run path. The rules:

- Exactly one execution: a worker starts a run only by moving it `queued → running` in one
  conditional UPDATE; a redelivered or duplicated task finds it no longer queued and does
  nothing (the ORM broker redelivers a task whose worker died; the sweep may re-hand a task).
- A lease: while it runs, the worker renews `RunTask.heartbeat_at` every
  `AGENTS_RUN_LEASE_SECONDS / 4`; `agents.recovery` finishes a run whose lease expired (or
  whose worker process is gone) as `error` "worker lost" — never `running` forever.
- Cancel before start: `run_cancel_queued` moves `queued → error` "cancelled before start";
  the worker that later dequeues it does nothing, so there is no model call and no debit.
"""

from __future__ import annotations

import contextvars
import logging
import os
import socket
import threading
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings
from django.db import connections, transaction
from django.db.models import F
from django.utils import timezone

from agents.ids import mint_id
from agents.models import Agent, Run
from agents.scheduling.models import RunTask
from agents_site.vocabulary import RunStatus
from tenancy import stores

logger = logging.getLogger(__name__)

#: The error of a run whose worker died while it ran (recovery finished it).
WORKER_LOST = "worker lost"
#: The error of a queued run stopped before any worker started it (not billed).
CANCELLED_BEFORE_START = "cancelled before start"
#: The error of a queued run the task queue never started within AGENTS_QUEUED_MAX_SECONDS.
NEVER_STARTED = "never started: the task queue did not deliver it in time"

#: The django-q2 function that executes a queued run.
EXECUTE_TASK = "agents.tasks.execute_run"


def worker_identity() -> str:
    """Return `host:pid` of this process (recorded on the runs it executes)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def run_enqueue(*, agent: Agent, input: str, actor: str, request_id: str = "") -> Run:
    """Record a queued run of `agent` and hand it to the task queue on commit; return it.

    Org context required. `input` is stored verbatim (≤128 KiB is the caller's check). The
    task is enqueued only after the surrounding transaction commits (so a worker never sees
    a run that is not there); if the queue refuses it, the run stays queued with no task id
    and `agents.recovery` hands it over again.
    """
    org = stores.current_org()
    alias = stores.current_alias()
    now = timezone.now()
    with transaction.atomic(using=alias):
        run = Run.objects.create(
            id=mint_id("run"),
            agent=agent,
            agent_name=agent.name,
            status=RunStatus.QUEUED,
            model=agent.model,
            input=input,
            actor=actor,
            created_at=now,
        )
        RunTask.objects.create(run=run, created_at=now)
        transaction.on_commit(lambda: run_dispatch(org=org, run_id=run.id), using=alias)
    return run


def run_dispatch(*, org: str, run_id: str) -> str | None:
    """Enqueue the django-q2 task executing queued run `run_id` of `org`; return its task id.

    Safe to call again for the same run (the worker's claim makes duplicates no-ops). Returns
    None, leaving the run for the sweep, when the broker refuses the task.
    """
    from django_q.tasks import async_task

    try:
        task_id = async_task(EXECUTE_TASK, org, run_id, task_name=run_id, group="agents.run")
    except Exception:  # the broker is down: the sweep retries
        logger.exception("could not enqueue run %s of %s", run_id, org)
        return None
    with stores.org_context(org):
        RunTask.objects.filter(run_id=run_id).update(task_id=task_id, enqueued_at=timezone.now(), enqueues=F("enqueues") + 1)
        _on_task_assigned(run_id=run_id, task_id=task_id)
    return task_id


def _on_task_assigned(*, run_id: str, task_id: str) -> None:
    """Hook: the run's session carries the task id as `taskWorkflowId` (sessions capability)."""


def run_claim(*, run_id: str) -> Run | None:
    """Move run `run_id` from `queued` to `running` for this worker; return it, or None.

    Org context required. None means another worker started it, or it was cancelled or
    finished already: the caller must do nothing.
    """
    now = timezone.now()
    with transaction.atomic(using=stores.current_alias()):
        claimed = Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(status=RunStatus.RUNNING, started_at=now)
        if not claimed:
            return None
        RunTask.objects.filter(run_id=run_id).update(worker=worker_identity(), heartbeat_at=now)
    return Run.objects.get(pk=run_id)


def run_finish_error(*, run_id: str, error: str, from_statuses: frozenset, now: datetime | None = None) -> bool:
    """Finish run `run_id` as `error` with `error` if its status is in `from_statuses`.

    One conditional UPDATE, so two finishers never both win. Returns True when this call
    finished it. Nothing is debited: only a successful run is billed. Org context required.
    """
    now = now or timezone.now()
    run = Run.objects.filter(pk=run_id).only("created_at", "started_at").first()
    if run is None:
        return False
    began = run.started_at or run.created_at
    duration_ms = max(0, int((now - began).total_seconds() * 1000)) if run.started_at else 0
    done = Run.objects.filter(pk=run_id, status__in=from_statuses).update(
        status=RunStatus.ERROR, error=error, finished_at=now, duration_ms=duration_ms
    )
    if done:
        _on_run_ended(run_id=run_id, error=error)
    return bool(done)


def _on_run_ended(*, run_id: str, error: str) -> None:
    """Hook: end the run's session `error` with the reason (sessions capability)."""


def run_cancel_queued(*, run_id: str, reason: str = CANCELLED_BEFORE_START) -> bool:
    """Cancel run `run_id` if no worker has started it; return True when it was cancelled.

    The run ends `error` "cancelled before start": no model call, no debit. A running run is
    not touched (its executor receives the stop through the session's control channel).
    """
    return run_finish_error(run_id=run_id, error=reason, from_statuses=frozenset({RunStatus.QUEUED}))


class _Heartbeat:
    """Renew a running run's lease from a daemon thread until stopped."""

    def __init__(self, run_id: str, interval: float) -> None:
        self.run_id = run_id
        self.interval = interval
        self.stop = threading.Event()
        context = contextvars.copy_context()  # a new Thread does not inherit the org ContextVar
        self.thread = threading.Thread(target=context.run, args=(self._beat,), name=f"lease-{run_id}", daemon=True)

    def _beat(self) -> None:
        try:
            while not self.stop.wait(self.interval):
                try:
                    RunTask.objects.filter(run_id=self.run_id).update(heartbeat_at=timezone.now())
                except Exception:  # a busy store skips one beat; the lease outlives a few
                    logger.warning("lease renewal of %s failed", self.run_id, exc_info=True)
        finally:
            connections.close_all()


@contextmanager
def lease(run_id: str):
    """Keep run `run_id`'s lease alive while the block runs. Org context required."""
    interval = max(0.2, settings.AGENTS_RUN_LEASE_SECONDS / 4)
    beat = _Heartbeat(run_id, interval)
    beat.thread.start()
    try:
        yield
    finally:
        beat.stop.set()
        beat.thread.join(timeout=5)


def run_execute_queued(*, org: str, run_id: str) -> str:
    """Claim queued run `run_id` and execute it through the one run path; return its status.

    Org context required (the task wraps it). A run that cannot be claimed is left alone,
    except a `running` one whose worker is gone, which is finished "worker lost" here (the
    ORM broker redelivers the task of a killed worker). Returns the run's final status, or
    `""` for an unknown run.
    """
    run = run_claim(run_id=run_id)
    if run is None:
        from agents.recovery import recover_run

        recover_run(run_id=run_id)
        return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""
    with lease(run_id):
        _execute(org=org, run=run)
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""


def _execute(*, org: str, run: Run) -> None:
    """Hand a claimed (`running`) run to the one run path (`agents.execution.run_execute`)."""
    from agents.execution import run_execute

    run_execute(run_id=run.id)
