"""Queued runs: submit, hand to django-q2, execute in a worker, cancel, finish when lost.

A background run (spec 003: `POST /v1/agents/{ref}/run` with `"background": true` or
`Prefer: respond-async`) and a scheduled run are both recorded `queued` with a task-backed
session and a `RunTask`, handed to the task queue once the recording transaction commits, and
executed by a worker through the one run path (`agents.execution.run_execute`: gate, record,
session, debit). The rules:

- Exactly once: a worker executes a run only after taking its lease (`agents.lease`) and moving
  it `queued → running` in one conditional UPDATE (inside `run_execute`); a redelivered or
  duplicated task finds the lease held or the run no longer queued and does nothing.
- Task-backed: the session carries the django-q2 task id as `taskWorkflowId` and the run id as
  `taskRunId`. A `stop` posted before a worker started the run cancels it — `error`
  "cancelled before start", no model call, no debit (`task_forward`); other commands posted
  meanwhile are replayed to the executor when it attaches (`RunSession.attach`).
- Nothing stays running: a run whose worker died is finished "worker lost" by
  `agents.recovery`; a run the worker could not start (gate denial, no inference) ends
  `error` "not started: …". Only a successful run is ever debited.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents.models import Agent, Run
from agents.scheduling.models import RunTask
from agents_site.errors import ApiError
from agents_site.vocabulary import ControlCommand, EventKind, RunStatus, SessionStatus
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

_QUEUED = frozenset({RunStatus.QUEUED})
_RUNNING = frozenset({RunStatus.RUNNING})


def run_submit(*, agent: Agent, input: str, actor: str, request_id: str = "", idempotency_key: str = "") -> tuple[Run, bool]:
    """Accept a background run of `agent`: record it queued and hand it to the queue.

    Spec 003: POST /v1/agents/{ref}/run with `"background": true` → 202 `{runId, sessionId}`.
    Order: input ≤128 KiB (400) → `Idempotency-Key` (same key and input → the first run,
    `replayed` True, in flight or not; another input → 409) → inference configured (503) →
    balance gate on the agent's org counting every run in flight, queued ones included (402
    / 503) → record. The worker gates again when it starts the run. Returns `(run, replayed)`.
    Org context required.
    """
    from agents.execution.service import InferenceUnavailable, check_input
    from agents.idempotency import clean_key, recorded_run, request_hash
    from agents.inference import inference_configured
    from billing.meter import balance_authorize, run_fee_cents

    text = check_input(input)
    key = clean_key(idempotency_key)
    digest = request_hash(agent_id=agent.id, input=text) if key else ""
    if key:
        earlier = recorded_run(key=key, digest=digest)
        if earlier is not None:
            return earlier, True
    if not inference_configured():
        raise InferenceUnavailable()
    # Gate and queue in one org-store transaction (BEGIN IMMEDIATE on SQLite): simultaneous
    # submissions of one org cannot both pass on the last fee.
    with stores.org_atomic():
        held = Run.objects.filter(status__in=RunStatus.IN_FLIGHT).count() if run_fee_cents() else 0
        balance_authorize(org_slug=stores.current_org(), actor=actor, held_runs=held)
        run = run_enqueue(agent=agent, input=text, actor=actor, request_id=request_id, idempotency=(key, digest))
    return run, False


def run_enqueue(*, agent: Agent, input: str, actor: str, request_id: str = "", title: str | None = None, idempotency: tuple[str, str] = ("", "")) -> Run:
    """Record a queued run of `agent` with its session, and hand it to the queue on commit.

    Org context required. `input` ≤128 KiB (400). `title` names the session (default: the
    start of the input). The task is enqueued only after the surrounding transaction commits
    (a worker never sees a run that is not there); if the queue refuses it, the run stays
    queued without a task id and `agents.recovery` hands it over again. The session is
    best-effort: without it the run still runs (and opens none).
    """
    from agents.execution.service import run_queue
    from agents.idempotency import reserve

    org = stores.current_org()
    alias = stores.current_alias()
    with transaction.atomic(using=alias):
        run = run_queue(agent=agent, input=input, actor=actor, request_id=request_id)
        key, digest = idempotency
        if key:
            reserve(key=key, digest=digest, run_id=run.id)  # a racing twin: 409, all rolled back
        run.session_id = _session_open(agent=agent, run=run, title=title)
        if run.session_id:
            Run.objects.filter(pk=run.pk).update(session_id=run.session_id)
        RunTask.objects.create(run=run, created_at=run.created_at)
        transaction.on_commit(lambda: run_dispatch(org=org, run_id=run.id), using=alias)
    return run


def _session_open(*, agent: Agent, run: Run, title: str | None) -> str:
    """Open the run's session (`running`, `taskRunId` = run id); return its id, or "" on failure."""
    from agents.run_session import session_title

    try:
        from sessions.services import session_create

        with transaction.atomic(using=stores.current_alias()):
            session = session_create(
                agent=agent.name,
                actor=run.actor[:256],
                title=session_title(title if title is not None else run.input),
                status=SessionStatus.RUNNING,
                task_run_id=run.id,
            )
        return session.id
    except Exception:
        logger.warning("queued run %s: session could not be opened", run.id, exc_info=True)
        return ""


def run_dispatch(*, org: str, run_id: str) -> str | None:
    """Enqueue the django-q2 task executing queued run `run_id` of `org`; return its task id.

    Safe to call again for the same run (the lease and the queued→running update make
    duplicates no-ops). The task id becomes the session's `taskWorkflowId`. Returns None,
    leaving the run for the sweep, when the broker refuses the task.
    """
    from django_q.tasks import async_task

    try:
        task_id = async_task(EXECUTE_TASK, org, run_id, task_name=run_id, group="agents.run")
    except Exception:  # the broker is down: the sweep retries
        logger.exception("could not enqueue run %s of %s", run_id, org)
        return None
    with stores.org_context(org):
        RunTask.objects.filter(run_id=run_id).update(task_id=task_id, enqueued_at=timezone.now(), enqueues=F("enqueues") + 1)
        session_id = Run.objects.filter(pk=run_id).values_list("session_id", flat=True).first()
        if session_id:
            try:
                from sessions.services import session_set_task_refs

                session_set_task_refs(session_id=session_id, task_workflow_id=task_id, task_run_id=run_id)
            except Exception:
                logger.warning("run %s: session %s not marked task-backed", run_id, session_id, exc_info=True)
    return task_id


def run_execute_queued(*, run_id: str) -> str:
    """Execute queued run `run_id` through the one run path in this worker; return its status.

    Org context required (the task wraps it). A run that is not queued is left alone, except a
    `running` one whose worker is gone, finished "worker lost" here (the ORM broker redelivers
    the task of a killed worker). A run whose lease a live worker holds is left to it. A run
    the run path refuses to start (402/503, no inference) ends `error` "not started: …".
    Returns the run's status after this call, or "" for an unknown run.
    """
    from agents.execution import run_execute
    from agents.execution.service import RunNotQueued
    from agents.lease import lease_kept, lease_take
    from agents.recovery import recover_run

    run = Run.objects.select_related("agent").filter(pk=run_id).first()
    if run is None:
        return ""
    if run.status == RunStatus.RUNNING:
        recover_run(run_id=run_id)
    elif run.status == RunStatus.QUEUED and lease_take(run_id=run_id):
        try:
            with lease_kept(run_id):
                run_execute(agent=run.agent, actor=run.actor, run_id=run_id)
        except RunNotQueued:
            pass  # cancelled (or taken) between the read and the start
        except ApiError as exc:
            if not run_finish_error(run_id=run_id, error=f"not started: {exc.message}", from_statuses=_QUEUED):
                _session_end(run_id=run_id)
        except Exception as exc:  # the queue's timeout, a bug: never leave it running
            logger.exception("run %s failed in its worker", run_id)
            run_finish_error(run_id=run_id, error=f"the run was interrupted: {exc}"[:2000], from_statuses=_RUNNING | _QUEUED)
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""


def run_finish_error(*, run_id: str, error: str, from_statuses: frozenset, now: datetime | None = None) -> bool:
    """Finish run `run_id` as `error` with `error` if its status is in `from_statuses`.

    One conditional UPDATE, so two finishers never both win; the run's session then gets a
    `log` event with the outcome and ends `error`. Nothing is debited: only a successful run is
    billed. Returns True when this call finished it. Org context required.
    """
    now = now or timezone.now()
    run = Run.objects.filter(pk=run_id).only("started_at").first()
    if run is None:
        return False
    duration_ms = max(0, int((now - run.started_at).total_seconds() * 1000)) if run.started_at else 0
    done = Run.objects.filter(pk=run_id, status__in=from_statuses).update(
        status=RunStatus.ERROR, error=error, finished_at=now, duration_ms=duration_ms
    )
    if done:
        _session_end(run_id=run_id)
    return bool(done)


def _session_end(*, run_id: str) -> None:
    """Record a finished run's outcome on its session and end the session (best-effort)."""
    run = Run.objects.filter(pk=run_id).only("session_id", "status", "model", "duration_ms", "error", "actor").first()
    if run is None or not run.session_id:
        return
    try:
        from sessions.errors import SessionFinished
        from sessions.services import session_append_event, session_update

        try:
            session_append_event(
                session_id=run.session_id,
                kind=EventKind.LOG,
                payload={"runId": run_id, "status": run.status, "model": run.model, "durationMs": run.duration_ms, "error": run.error},
                actor=run.actor[:256],
            )
            session_update(session_id=run.session_id, status=SessionStatus.ERROR if run.status == RunStatus.ERROR else SessionStatus.DONE)
        except SessionFinished:
            pass
    except Exception:
        logger.warning("run %s: session %s not ended", run_id, run.session_id, exc_info=True)


def run_cancel_queued(*, run_id: str) -> bool:
    """Cancel run `run_id` if no worker has started it; return True when it was cancelled.

    The run ends `error` "cancelled before start": no model call, no debit. A running run is
    not touched (its executor receives the stop through the session's control channel).
    """
    return run_finish_error(run_id=run_id, error=CANCELLED_BEFORE_START, from_statuses=_QUEUED)


def task_forward(*, session_id: str, command: str) -> bool:
    """Hand a control command recorded on a task-backed session to its run's task.

    Called by `sessions.control.control_send` when the session has no live executor. `stop`
    cancels a queued run. Any command to a run still queued, or started but not yet attached
    to its session, is delivered when the executor attaches (it replays the session's control
    events). Returns True when the task took the command; False when the session has no run
    here, or its executor is live (the caller forwards to it) or finished. Org context required.
    """
    run = Run.objects.filter(session_id=session_id).only("id", "status").first()
    if run is None:
        return False
    if command == ControlCommand.STOP and run.status == RunStatus.QUEUED and run_cancel_queued(run_id=run.id):
        return True
    status = Run.objects.filter(pk=run.id).values_list("status", flat=True).first()
    if status == RunStatus.QUEUED:
        return True
    if status == RunStatus.RUNNING:
        from sessions.selectors import executor_channel

        return not executor_channel(session_id=session_id)
    return False
