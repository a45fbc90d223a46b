"""Queued runs: accepted now, executed by a django-q2 worker, cancelled, ended when lost.

A background run (spec 003: `POST /v1/agents/{ref}/run` with `"background": true` or
`Prefer: respond-async`) and a scheduled run are both accepted by the run lifecycle
(`run_starting` with a queued `RunRequest`: checks, key, balance gate, the `queued` row and its task-backed
session, and a `RunTask`, in one transaction), handed to the task queue once that transaction
commits (`runs.dispatch`), and executed by a worker: lease, then its kind's
`RunPolicy.execute_queued` (`run_mark_running`, the agent loop, `run_finish`). The rules:

- Exactly once: a worker executes a run only after taking its lease (`runs.lease`) and moving
  it `queued → running` in one conditional UPDATE; a redelivered or duplicated task finds the
  lease held or the run no longer queued and does nothing.
- The fee is held from acceptance (a queued run counts against the balance); the worker
  checks once more that the balance still covers every fee held before it starts the run.
- Task-backed: the session carries the django-q2 task id as `taskWorkflowId` and the run id as
  `taskRunId`. A `stop` posted before a worker started the run cancels it — `error`
  "cancelled before start", no model call, no debit (`task_command`); other commands posted
  meanwhile are replayed to the executor when it attaches (`RunSession.attach`).
- Nothing stays running: a run whose worker died is finished "worker lost" by
  `runs.recovery`; a run the worker cannot start (inference gone) ends `error`
  "not started: …". Only a successful run is ever debited.
"""

from __future__ import annotations

import logging

from django.db import transaction

from runs.dispatch import run_dispatch
from runs.lease import lease_kept, lease_take
from runs.models import Run, RunTask
from runs.recovery import recover_run
from runs.lifecycle import Agent, Outcome, run_finish, run_starting, stop_reason
from runs.request import RunRequest
from runs.policies import run_policy
from runs.shutdown import executing, worker_stopping
from agents_site.vocabulary import ControlCommand, RunKind, RunStatus
from tenancy import stores
from sessions.selectors import executor_channel

logger = logging.getLogger(__name__)

#: The error of a queued run stopped before any worker started it (not billed).
CANCELLED_BEFORE_START = "cancelled before start"

_QUEUED = frozenset({RunStatus.QUEUED})


def run_submit(
    *,
    agent: Agent,
    input: str,
    actor: str,
    request_id: str = "",
    idempotency_key: str = "",
    kind: str = RunKind.RUN,
    title: str | None = None,
) -> tuple[Run, bool]:
    """Accept a queued run of `agent` for a worker; return `(run, replayed)`.

    Spec 003: POST /v1/agents/{ref}/run with `"background": true` → 202 `{runId, sessionId}`;
    a scheduled run (`kind` `scheduled`, `title` naming the slot) too.
    Order and refusals are `run_starting`'s: 400 input, 409 key mismatch, 503 inference, 402/503
    gate — nothing recorded; a kind whose policy records refusals (`scheduled`) returns a
    finished `error` run "not started: …" instead. The same key and input answer the first run again (`replayed`
    True), in flight or not. The task is enqueued only after the recording transaction
    commits (a worker never sees a run that is not there); if the queue refuses it, the run
    stays queued without a task id and `runs.recovery` hands it over again. Org context
    required.
    """
    org = stores.current_org()
    request = RunRequest(kind=kind, agent=agent, input=input, actor=actor, request_id=request_id,
                         idempotency_key=idempotency_key, queued=True, title=title)
    with run_starting(request) as run:
        if run.started_here:  # the task row commits with the run; the queue hears of it once both have
            RunTask.objects.create(run=run, created_at=run.created_at)
            run_id = run.id
            transaction.on_commit(lambda: run_dispatch(org=org, run_id=run_id), using=stores.current_alias())
    return run, run.replayed


def run_execute_queued(*, run_id: str) -> str:
    """Execute queued run `run_id` in this worker through the lifecycle; return its status.

    Org context required (the task wraps it). A worker told to stop hands a queued run back to
    the queue untouched (`runs.shutdown`). A run that is not queued is left alone, except a
    `running` one whose worker is gone, finished "worker lost" here (the ORM broker redelivers
    the task of a killed worker). A run whose lease a live worker holds is left to it. A run
    that can no longer start (no inference, an external agent) ends `error` "not started: …".
    Returns the run's status after this call, or "" for an unknown run.
    """
    run = Run.objects.select_related("agent").filter(pk=run_id).first()
    if run is None:
        return ""
    if run.status == RunStatus.QUEUED and worker_stopping():
        run_dispatch(org=stores.current_org(), run_id=run_id)  # this worker is stopping: another takes it
    elif run.status == RunStatus.RUNNING:
        recover_run(run_id=run_id)
    elif run.status == RunStatus.QUEUED and lease_take(run_id=run_id):
        try:
            execute = run_policy(run.kind).execute_queued  # the agent loop for `run` and `scheduled` (agents.execution.queued)
            with lease_kept(run_id), executing(org=stores.current_org(), run_id=run_id):
                if execute is None:
                    run_finish(run_id=run_id, outcome=Outcome.failed(f"not started: runs of kind {run.kind} are not executed by a worker"),
                               from_statuses=_QUEUED)
                else:
                    execute(run)
        except Exception as exc:  # the queue's timeout, a bug: never leave it running
            logger.exception("run %s failed in its worker", run_id)
            run_finish(run_id=run_id, outcome=Outcome.failed(f"the run was interrupted: {exc}"[:2000]))
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""


def run_cancel_queued(*, run_id: str, message: str | None = None) -> bool:
    """Cancel run `run_id` if no worker has started it; return True when it was cancelled.

    The run ends `error` "cancelled before start" (then `: <message>` when the stop gave
    one): no model call, no debit. A running run is not touched (its executor receives the
    stop through the session's control channel).
    """
    outcome = Outcome.failed(stop_reason(CANCELLED_BEFORE_START, message))
    return run_finish(run_id=run_id, outcome=outcome, from_statuses=_QUEUED) is not None


def task_command(*, session, command: str, message: str | None = None) -> bool:
    """Hand a control command recorded on a task-backed session to its run's task.

    Registered with `sessions.control` (the session has no live executor). `stop` cancels a
    queued run. Any command to a run still queued, or started but not yet attached to its
    session, is delivered when the executor attaches (it replays the session's control
    events). Returns True when the task took the command; False when the session has no run
    here, or its executor is live (the caller forwards to it) or finished. Org context required.
    """
    if not session.task_workflow_id:
        return False
    run = Run.objects.filter(session_id=session.id).only("id", "status").first()
    if run is None:
        return False
    if command == ControlCommand.STOP and run.status == RunStatus.QUEUED and run_cancel_queued(run_id=run.id, message=message):
        return True
    status = Run.objects.filter(pk=run.id).values_list("status", flat=True).first()
    if status == RunStatus.QUEUED:
        return True
    if status == RunStatus.RUNNING:
        return not executor_channel(session_id=session.id)
    return False
