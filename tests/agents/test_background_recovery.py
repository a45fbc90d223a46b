"""Queued runs: the exactly-once claim, cancel before start, and worker-lost recovery."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from agents.background import CANCELLED_BEFORE_START, NEVER_STARTED, WORKER_LOST, run_cancel_queued, run_claim, run_enqueue
from agents.models import Run
from agents.recovery import recover_org, recover_run
from agents.scheduling.models import RunTask
from agents.services import AgentInput, agent_create
from agents_site.vocabulary import RunStatus
from billing.models import LedgerEntry


@pytest.fixture
def queued_run(org_a):
    """Return a factory queueing a run of agent `bg` in org_a; returns the run id."""
    with org_a.context():
        agent = agent_create(data=AgentInput(name="bg"))

    def factory(input: str = "hello") -> str:
        with org_a.context():
            return run_enqueue(agent=agent, input=input, actor="tester").id

    return factory


def _run(org, run_id) -> Run:
    with org.context():
        return Run.objects.get(pk=run_id)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_enqueue_records_a_queued_run_and_hands_it_to_the_queue(org_a, queued_run):
    run_id = queued_run("hello")

    run = _run(org_a, run_id)
    assert (run.status, run.input, run.actor, run.finished_at) == (RunStatus.QUEUED, "hello", "tester", None)
    with org_a.context():
        task = RunTask.objects.get(run_id=run_id)
    (queued,) = OrmQ.objects.all()
    assert queued.task["id"] == task.task_id and queued.task["args"] == (org_a.slug, run_id)
    assert task.enqueues == 1


def test_only_the_first_claim_starts_a_run(org_a, queued_run):
    run_id = queued_run()

    with org_a.context():
        first = run_claim(run_id=run_id)
        second = run_claim(run_id=run_id)
        task = RunTask.objects.get(run_id=run_id)

    assert first is not None and first.status == RunStatus.RUNNING and first.started_at is not None
    assert second is None
    assert task.worker == f"{socket.gethostname()}:{os.getpid()}" and task.heartbeat_at is not None


def test_cancel_before_start_ends_the_run_error_and_a_worker_then_does_nothing(org_a, queued_run):
    run_id = queued_run()

    with org_a.context():
        cancelled = run_cancel_queued(run_id=run_id)
        again = run_cancel_queued(run_id=run_id)
        claimed = run_claim(run_id=run_id)

    run = _run(org_a, run_id)
    assert (cancelled, again, claimed) == (True, False, None)
    assert (run.status, run.error, run.duration_ms) == (RunStatus.ERROR, CANCELLED_BEFORE_START, 0)
    assert run.finished_at is not None
    assert not LedgerEntry.objects.filter(run_id=run_id).exists()


def test_cancel_does_not_touch_a_running_run(org_a, queued_run):
    run_id = queued_run()
    with org_a.context():
        run_claim(run_id=run_id)
        assert run_cancel_queued(run_id=run_id) is False
    assert _run(org_a, run_id).status == RunStatus.RUNNING


def test_a_running_run_with_an_expired_lease_is_finished_worker_lost(org_a, queued_run, settings):
    settings.AGENTS_RUN_LEASE_SECONDS = 30
    run_id = queued_run()
    with org_a.context():
        run_claim(run_id=run_id)
        RunTask.objects.filter(run_id=run_id).update(worker="elsewhere:1", heartbeat_at=timezone.now() - timedelta(seconds=31))
        report = recover_org(org=org_a.slug, now=timezone.now())

    run = _run(org_a, run_id)
    assert report.lost == [run_id]
    assert (run.status, run.error) == (RunStatus.ERROR, WORKER_LOST)
    assert not LedgerEntry.objects.filter(run_id=run_id).exists()


def test_a_running_run_whose_worker_process_is_gone_is_finished_at_once(org_a, queued_run):
    run_id = queued_run()
    with org_a.context():
        run_claim(run_id=run_id)
        RunTask.objects.filter(run_id=run_id).update(worker=f"{socket.gethostname()}:{_dead_pid()}", heartbeat_at=timezone.now())
        finished = recover_run(run_id=run_id)

    assert finished is True
    assert _run(org_a, run_id).error == WORKER_LOST


def test_a_running_run_with_a_live_worker_and_fresh_lease_is_left_alone(org_a, queued_run):
    run_id = queued_run()
    with org_a.context():
        run_claim(run_id=run_id)  # this process, heartbeat now
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


def test_a_queued_run_never_started_in_time_ends_error(org_a, queued_run, settings):
    settings.AGENTS_QUEUED_MAX_SECONDS = 600
    run_id = queued_run()
    with org_a.context():
        RunTask.objects.filter(run_id=run_id).update(enqueued_at=timezone.now() - timedelta(seconds=601))
        report = recover_org(org=org_a.slug, now=timezone.now())

    assert report.never_started == [run_id]
    run = _run(org_a, run_id)
    assert (run.status, run.error) == (RunStatus.ERROR, NEVER_STARTED)
