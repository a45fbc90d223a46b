"""Durable execution against real `manage.py qcluster` processes (ORM broker, test database)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from django.utils import timezone
from django_q.models import OrmQ

from agents.background import WORKER_LOST, run_enqueue
from agents.models import Run
from agents.scheduling.models import RunTask
from agents.services import AgentInput, agent_create
from agents_site.vocabulary import RunStatus
from billing.models import LedgerEntry
from tests.support.qcluster import QCluster, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def _status(org, run_id) -> tuple[str, str]:
    with org.context():
        run = Run.objects.get(pk=run_id)
        return run.status, run.error


def test_a_restarted_cluster_finishes_runs_its_dead_workers_left_running(make_org):
    org = make_org("crash")
    with org.context():
        agent = agent_create(data=AgentInput(name="bg"))
        run_id = run_enqueue(agent=agent, input="hello", actor="tester").id
        # As a worker killed mid-run leaves it: running, leased to a process that is gone.
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        Run.objects.filter(pk=run_id).update(status=RunStatus.RUNNING, started_at=timezone.now())
        RunTask.objects.filter(run_id=run_id).update(worker=f"{socket.gethostname()}:{dead.pid}", heartbeat_at=timezone.now())
    OrmQ.objects.all().delete()  # the task itself is gone too: only start-up recovery can find it

    cluster = QCluster({"AGENTS_Q_WORKERS": "1"}).start()
    try:
        wait_for(lambda: _status(org, run_id)[0] == RunStatus.ERROR, timeout=30, message=f"recovery\n{cluster.log()[-3000:]}")
    finally:
        cluster.stop()

    assert _status(org, run_id) == (RunStatus.ERROR, WORKER_LOST)
    assert not LedgerEntry.objects.filter(run_id=run_id).exists()
