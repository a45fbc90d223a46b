"""Nothing is left running: finish runs whose worker died, re-hand runs the queue never got.

Run by the django-q2 schedule `agents: sweep` every minute and once when a worker process
starts (`runs.wiring`), across every org (`tenancy.stores.existing_org_slugs`). Policy:

- A `running` run whose worker is gone — its heartbeat is older than
  `AGENTS_RUN_LEASE_SECONDS`, or its recorded `host:pid` is this host and that process no
  longer exists — is finished `error` "worker lost". It is never re-run (a run may have
  called tools with side effects) and never debited (only a successful run is billed; the
  ledger's unique debit per run forbids a second one anyway).
- A `running` run with no task record (a synchronous run: a request's, a chat round's) is
  finished the same way when the process executing it is gone — the `host:pid` its session's
  executor channel records is this host's and no longer exists (a web process killed; issue
  51) — and otherwise once it is older than `SYNC_RUN_MAX` (2 h): until then it holds its fee.
- A `queued` run whose task the queue never accepted (the process died between the commit
  and the enqueue), or whose lease holder died before starting it, is handed to the queue
  again after `AGENTS_RUN_LEASE_SECONDS`.
- A `queued` run not started within `AGENTS_QUEUED_MAX_SECONDS` is finished `error`
  "never started" (a Redis broker loses the tasks a killed cluster had prefetched).
- An `ok` run with a fee that finished `CHARGE_GRACE` to `CHARGE_LOOKBACK` ago and has no debit
  in its org's ledger is debited now (issue 51, found by the soak): its process died between
  the finish's commit and the debit that follows it (the ledger is another database). The debit
  is idempotent per run, so a late live debit and this one never both move money.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from billing.meter import run_charge
from billing.selectors import runs_debited
from runs.dispatch import run_dispatch
from runs.lease import holder_gone, process_gone
from runs.models import Run
from runs.approvals import resume_dispatch, run_rewait
from runs.lifecycle import Outcome, run_finish
from runs.models import RunTask
from agents_site.vocabulary import RunKind, RunStatus
from sessions.control import executor_process
from sessions.models import Session
from tenancy import stores

logger = logging.getLogger(__name__)

#: The error of a run whose worker died while it ran (recovery finished it).
WORKER_LOST = "worker lost"
#: The error of a queued run the task queue never started within AGENTS_QUEUED_MAX_SECONDS.
NEVER_STARTED = "never started: the task queue did not deliver it in time"
#: A synchronous run (no task record) still `running` after this was lost with its web process.
SYNC_RUN_MAX = timedelta(hours=2)
#: An ok run is debited by its finishing process right after the finish commits: one finished
#: longer ago than this without a debit lost it with that process.
CHARGE_GRACE = timedelta(seconds=30)
#: How far back the sweep looks for such a run (each minute; a cluster down longer loses nothing
#: it ran itself, only what another process failed to debit before then).
CHARGE_LOOKBACK = timedelta(hours=1)

_RUNNING = frozenset({RunStatus.RUNNING})
_QUEUED = frozenset({RunStatus.QUEUED})


@dataclass
class RecoveryReport:
    """Runs finished as lost, runs re-handed to the queue, runs that never started."""

    lost: list[str] = field(default_factory=list)
    redispatched: list[str] = field(default_factory=list)
    never_started: list[str] = field(default_factory=list)
    charged: list[str] = field(default_factory=list)  # ok runs whose lost debit the sweep made


def runs_recover(*, now: datetime | None = None) -> RecoveryReport:
    """Apply the recovery policy to every org; return what was done."""
    now = now or timezone.now()
    report = RecoveryReport()
    for slug in stores.existing_org_slugs():
        try:
            with stores.org_context(slug, create=False):
                recover_org(org=slug, now=now, report=report)
        except Exception:
            logger.exception("run recovery failed for org %s", slug)
    return report


def recover_org(*, org: str, now: datetime, report: RecoveryReport | None = None) -> RecoveryReport:
    """Apply the recovery policy to the current org's runs. Org context required."""
    report = report if report is not None else RecoveryReport()
    lease = timedelta(seconds=settings.AGENTS_RUN_LEASE_SECONDS)
    running = list(Run.objects.filter(status=RunStatus.RUNNING).exclude(kind=RunKind.ROUTED).select_related("task").only(
        "id", "kind", "session_id", "started_at", "created_at", "task__worker", "task__heartbeat_at"
    ))
    executors = _executors([run for run in running if _task_of(run) is None])
    for run in running:
        if not _is_lost(run, now, executors):
            continue
        if run_rewait(run_id=run.id):  # a resumed run lost mid-turn: its answered turn is resumed again (issue 28)
            if resume_dispatch(org=org, run_id=run.id):
                report.redispatched.append(run.id)
            continue
        if _fail(run.id, WORKER_LOST, _RUNNING):
            logger.warning("run %s of %s finished: %s", run.id, org, WORKER_LOST)
            report.lost.append(run.id)
    queued = RunTask.objects.filter(run__status=RunStatus.QUEUED)
    for task in queued.filter(task_id="", created_at__lt=now - lease).only("run_id"):
        if run_dispatch(org=org, run_id=task.run_id):
            report.redispatched.append(task.run_id)
    for task in queued.exclude(worker="").only("run_id", "worker", "heartbeat_at"):
        freed = holder_gone(task, now) and RunTask.objects.filter(run_id=task.run_id, worker=task.worker).update(worker="", heartbeat_at=None)
        if freed and run_dispatch(org=org, run_id=task.run_id):
            report.redispatched.append(task.run_id)
    too_old = now - timedelta(seconds=settings.AGENTS_QUEUED_MAX_SECONDS)
    for task in queued.filter(Q(enqueued_at__lt=too_old) | Q(enqueued_at__isnull=True, created_at__lt=too_old)).only("run_id"):
        if _fail(task.run_id, NEVER_STARTED, _QUEUED):
            report.never_started.append(task.run_id)
    report.charged += _charge_lost_debits(org=org, now=now)
    return report


def _charge_lost_debits(*, org: str, now: datetime) -> list[str]:
    """Debit the current org's ok runs with a fee that finished `CHARGE_GRACE`..`CHARGE_LOOKBACK`
    before `now` and have no debit; return their ids (see the module doc)."""
    finished = list(Run.objects.filter(status=RunStatus.OK, fee_cents__gt=0, finished_at__gte=now - CHARGE_LOOKBACK,
                                       finished_at__lt=now - CHARGE_GRACE).only("id", "fee_cents", "model", "actor", "request_id"))
    if not finished:
        return []
    debited = runs_debited(org_slug=org, run_ids=[run.id for run in finished])
    charged = []
    for run in finished:
        if run.id in debited or not run.actor:
            continue
        if run_charge(org_slug=org, run_id=run.id, cents=run.fee_cents, model=run.model, actor=run.actor, request_id=run.request_id):
            logger.warning("run %s of %s: its debit was lost with its process; debited %s cents now", run.id, org, run.fee_cents)
            charged.append(run.id)
    return charged


def recover_run(*, run_id: str, now: datetime | None = None) -> bool:
    """Finish run `run_id` "worker lost" if it is `running` and its worker is gone.

    Org context required. Returns True when this call finished it.
    """
    now = now or timezone.now()
    run = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).exclude(kind=RunKind.ROUTED).select_related("task").first()
    if run is None or not _is_lost(run, now, _executors([run] if _task_of(run) is None else [])):
        return False
    return _fail(run_id, WORKER_LOST, _RUNNING)


def _fail(run_id: str, error: str, from_statuses: frozenset) -> bool:
    """End run `run_id` `error` with `error` through the lifecycle; return True when this call did."""
    return run_finish(run_id=run_id, outcome=Outcome.failed(error), from_statuses=from_statuses) is not None


def _is_lost(run: Run, now: datetime, executors: dict[str, str]) -> bool:
    """Return True when `run` (status `running`) has no live worker by the policy above.

    `executors`: session id → the `host:pid` executing it (`_executors`), for runs with no task.
    """
    task = _task_of(run)
    if task is None:
        return process_gone(executors.get(run.session_id, "")) or now - (run.started_at or run.created_at) > SYNC_RUN_MAX
    return holder_gone(task, now)


def _executors(runs: list[Run]) -> dict[str, str]:
    """Return `{session id: host:pid}` of the processes executing `runs` (their sessions' executor
    channels, `sessions.control.executor_process`); a session with none recorded is left out. One query."""
    ids = [run.session_id for run in runs if run.session_id]
    if not ids:
        return {}
    channels = Session.objects.filter(pk__in=ids).exclude(executor_channel="").values_list("id", "executor_channel")
    return {str(session_id): executor_process(channel) for session_id, channel in channels if executor_process(channel)}


def _task_of(run: Run) -> RunTask | None:
    try:
        return run.task
    except RunTask.DoesNotExist:
        return None
