"""Queued runs: the task-backed session, the worker lease, cancel before start, recovery."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from runs.background import CANCELLED_BEFORE_START, run_cancel_queued, run_submit
from runs.recovery import NEVER_STARTED, WORKER_LOST
from runs.lease import lease_take, worker_identity
from runs.models import Run
from runs.recovery import recover_org, recover_run
from runs.models import RunTask
from agents.services import AgentInput, agent_create
from agents_site.vocabulary import RunStatus, SessionStatus
from billing.models import LedgerEntry
from sessions.models import Event, Session


@pytest.fixture
def queued_run(org_a, upstream):
    """Return a factory queueing a run of agent `bg` in org_a (funded, inference wired); returns the run id."""
    from billing.services import credit_add

    credit_add(org=org_a.org, cents=10_000)
    with org_a.context():
        agent = agent_create(data=AgentInput(name="bg"))

    def factory(input: str = "hello") -> str:
        with org_a.context():
            return run_submit(agent=agent, input=input, actor=f"{org_a.slug}/tester")[0].id

    return factory


def _run(org, run_id) -> Run:
    with org.context():
        return Run.objects.get(pk=run_id)


def _as_running(org, run_id, *, worker: str, heartbeat_age: float = 0) -> None:
    """Put a queued run where a worker executing it leaves it: running, leased to `worker`."""
    with org.context():
        Run.objects.filter(pk=run_id).update(status=RunStatus.RUNNING, started_at=timezone.now())
        RunTask.objects.filter(run_id=run_id).update(worker=worker, heartbeat_at=timezone.now() - timedelta(seconds=heartbeat_age))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _session(org, run_id) -> tuple[Session, list[tuple[str, dict]]]:
    with org.context():
        session = Session.objects.get(pk=Run.objects.get(pk=run_id).session_id)
        events = [(e.kind, json.loads(e.payload)) for e in Event.objects.filter(session_id=session.id).order_by("seq")]
    return session, events


def test_enqueue_records_a_queued_run_with_a_task_backed_session(org_a, queued_run):
    run_id = queued_run("hello")

    run = _run(org_a, run_id)
    assert (run.status, run.input, run.actor, run.finished_at) == (RunStatus.QUEUED, "hello", f"{org_a.slug}/tester", None)
    with org_a.context():
        task = RunTask.objects.get(run_id=run_id)
    (queued,) = OrmQ.objects.all()
    assert queued.task["id"] == task.task_id and queued.task["args"] == (org_a.slug, run_id)
    assert task.enqueues == 1
    session, events = _session(org_a, run_id)
    assert (session.status, session.task_workflow_id, session.task_run_id, session.title) == (SessionStatus.RUNNING, task.task_id, run_id, "hello")
    assert events == []


def test_a_lease_is_taken_once_and_a_dead_holders_lease_is_taken_over(org_a, queued_run, settings):
    settings.AGENTS_RUN_LEASE_SECONDS = 30
    first, second = queued_run(), queued_run()
    with org_a.context():
        assert lease_take(run_id=first) is True
        assert RunTask.objects.get(run_id=first).worker == worker_identity()
        RunTask.objects.filter(run_id=second).update(worker="otherhost:1", heartbeat_at=timezone.now())
        assert lease_take(run_id=second) is False  # a live worker elsewhere holds it
        RunTask.objects.filter(run_id=second).update(heartbeat_at=timezone.now() - timedelta(seconds=31))
        assert lease_take(run_id=second) is True  # its holder stopped renewing
        assert RunTask.objects.get(run_id=second).worker == f"{socket.gethostname()}:{worker_identity().split(':')[-1]}"


def test_cancel_before_start_ends_run_and_session_error_without_a_debit(org_a, queued_run):
    run_id = queued_run()

    with org_a.context():
        cancelled = run_cancel_queued(run_id=run_id)
        again = run_cancel_queued(run_id=run_id)

    run = _run(org_a, run_id)
    assert (cancelled, again) == (True, False)
    assert (run.status, run.error, run.duration_ms) == (RunStatus.ERROR, CANCELLED_BEFORE_START, 0)
    assert run.finished_at is not None and run.started_at is None
    session, events = _session(org_a, run_id)
    assert session.status == SessionStatus.ERROR and session.ended_at is not None
    assert [(k, e["status"], e["error"]) for k, e in events] == [("log", "error", CANCELLED_BEFORE_START)]
    assert not LedgerEntry.objects.filter(run_id=run_id).exists()


def test_cancel_does_not_touch_a_running_run(org_a, queued_run):
    run_id = queued_run()
    _as_running(org_a, run_id, worker=worker_identity())
    with org_a.context():
        assert run_cancel_queued(run_id=run_id) is False
    assert _run(org_a, run_id).status == RunStatus.RUNNING


def test_a_running_run_with_an_expired_lease_is_finished_worker_lost(org_a, queued_run, settings):
    settings.AGENTS_RUN_LEASE_SECONDS = 30
    run_id = queued_run()
    _as_running(org_a, run_id, worker="elsewhere:1", heartbeat_age=31)

    with org_a.context():
        report = recover_org(org=org_a.slug, now=timezone.now())

    run = _run(org_a, run_id)
    assert report.lost == [run_id]
    assert (run.status, run.error) == (RunStatus.ERROR, WORKER_LOST)
    session, events = _session(org_a, run_id)
    assert session.status == SessionStatus.ERROR and events[-1][1]["error"] == WORKER_LOST
    assert not LedgerEntry.objects.filter(run_id=run_id).exists()


def test_a_running_run_whose_worker_process_is_gone_is_finished_at_once(org_a, queued_run):
    run_id = queued_run()
    _as_running(org_a, run_id, worker=f"{socket.gethostname()}:{_dead_pid()}")

    with org_a.context():
        finished = recover_run(run_id=run_id)

    assert finished is True
    assert _run(org_a, run_id).error == WORKER_LOST


def test_a_running_run_with_a_live_worker_and_fresh_lease_is_left_alone(org_a, queued_run):
    run_id = queued_run()
    _as_running(org_a, run_id, worker=worker_identity())

    with org_a.context():
        report = recover_org(org=org_a.slug, now=timezone.now())

    assert report.lost == []
    assert _run(org_a, run_id).status == RunStatus.RUNNING


def test_a_queued_run_the_queue_never_got_is_handed_over_again(org_a, queued_run, settings):
    settings.AGENTS_RUN_LEASE_SECONDS = 30
    run_id = queued_run()
    OrmQ.objects.all().delete()
    with org_a.context():
        RunTask.objects.filter(run_id=run_id).update(task_id="", enqueued_at=None, created_at=timezone.now() - timedelta(seconds=31))
        report = recover_org(org=org_a.slug, now=timezone.now())
        task = RunTask.objects.get(run_id=run_id)

    assert report.redispatched == [run_id]
    assert task.task_id and task.enqueues == 2
    assert [q.task["args"] for q in OrmQ.objects.all()] == [(org_a.slug, run_id)]
    assert _run(org_a, run_id).status == RunStatus.QUEUED
    assert _session(org_a, run_id)[0].task_workflow_id == task.task_id


def test_a_queued_run_whose_lease_holder_died_is_freed_and_handed_over(org_a, queued_run):
    run_id = queued_run()
    with org_a.context():
        RunTask.objects.filter(run_id=run_id).update(worker=f"{socket.gethostname()}:{_dead_pid()}", heartbeat_at=timezone.now())
        report = recover_org(org=org_a.slug, now=timezone.now())
        task = RunTask.objects.get(run_id=run_id)

    assert report.redispatched == [run_id]
    assert (task.worker, task.enqueues) == ("", 2)


def test_a_queued_run_never_started_in_time_ends_error(org_a, queued_run, settings):
    settings.AGENTS_QUEUED_MAX_SECONDS = 600
    run_id = queued_run()
    with org_a.context():
        RunTask.objects.filter(run_id=run_id).update(enqueued_at=timezone.now() - timedelta(seconds=601))
        report = recover_org(org=org_a.slug, now=timezone.now())

    assert report.never_started == [run_id]
    run = _run(org_a, run_id)
    assert (run.status, run.error) == (RunStatus.ERROR, NEVER_STARTED)
