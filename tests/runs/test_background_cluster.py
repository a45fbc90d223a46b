"""Durable execution against real `manage.py qcluster` processes (ORM broker, test database)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading

import httpx
import pytest
import redis
from django.utils import timezone
from django_q.models import OrmQ

from runs.background import run_submit
from runs.recovery import WORKER_LOST
from runs.models import Run
from runs.models import RunTask
from agents.services import AgentInput, agent_create
from agents_site.vocabulary import RunStatus
from billing.models import LedgerEntry
from sessions.models import Session
from tests.agents.conftest import debits, fund, make_agent
from tests.support.live import LiveServer
from tests.support.qcluster import QCluster, wait_for
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

#: Broker and channel layer of the Redis test (a database of its own, flushed around it).
REDIS_URL = os.environ.get("AGENTS_TEST_REDIS_BROKER_URL", "redis://127.0.0.1:6379/12")


def _status(org, run_id) -> tuple[str, str]:
    with org.context():
        run = Run.objects.get(pk=run_id)
        return run.status, run.error


def test_a_restarted_cluster_finishes_runs_its_dead_workers_left_running(make_org, settings):
    org = make_org("crash")
    settings.INFERENCE_BASE_URL = "http://127.0.0.1:9/v1"  # accepted here; the run never reaches a model
    settings.CLOUD_AGENT_FEE_CENTS = 0
    with org.context():
        agent = agent_create(data=AgentInput(name="bg"))
        run_id = run_submit(agent=agent, input="hello", actor="tester")[0].id
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


def _cluster_env(upstream) -> dict:
    return {
        "AGENTS_Q_WORKERS": "1",
        "AGENTS_RUN_LEASE_SECONDS": "2",
        "INFERENCE_BASE_URL": upstream.base_url,
        "INFERENCE_API_KEY": "test-key",
        "AGENTS_DEFAULT_MODEL": "test-model",
    }


def test_a_background_run_killed_with_its_worker_is_finished_once_the_cluster_restarts(make_org, upstream):
    org = make_org("sigkill")
    fund(org, 1000)
    make_agent(org, "slow")
    released = threading.Event()
    upstream.script(Reply(hold=released, content="too late"))
    first = QCluster(_cluster_env(upstream), name="qcluster-first").start()
    second = None
    try:
        accepted = org.client.post("/v1/agents/slow/run", json.dumps({"input": "hello", "background": True}), content_type="application/json")
        assert accepted.status_code == 202
        run_id = accepted.json()["runId"]
        # The worker has started the run and is waiting on the model.
        wait_for(lambda: _status(org, run_id)[0] == RunStatus.RUNNING and upstream.chat_requests, timeout=30, message=f"the run to start\n{first.log()[-3000:]}")

        first.kill()  # SIGKILL: cluster, worker, monitor, pusher
        assert _status(org, run_id)[0] == RunStatus.RUNNING  # what a crash leaves behind
        released.set()

        second = QCluster(_cluster_env(upstream), name="qcluster-second").start()
        wait_for(lambda: _status(org, run_id)[0] == RunStatus.ERROR, timeout=30, message=f"recovery\n{second.log()[-3000:]}")
    finally:
        released.set()
        first.kill()
        if second is not None:
            second.stop()

    assert _status(org, run_id) == (RunStatus.ERROR, WORKER_LOST)
    assert len(upstream.chat_requests) == 1  # never re-run
    assert debits(org) == []  # at most one debit; a lost run is not a successful one
    with org.context():
        session = Session.objects.get(pk=accepted.json()["sessionId"])
    assert session.status == "error"


def test_on_redis_a_worker_runs_background_runs_and_a_stop_reaches_the_running_task(make_org, upstream):
    """Redis as django-q2 broker and channel layer: web and worker are separate processes."""
    redis.from_url(REDIS_URL).flushdb()
    org = make_org("redisq")
    fund(org, 1000)
    env = {**_cluster_env(upstream), "REDIS_URL": REDIS_URL}
    web = LiveServer(env).start()
    cluster = QCluster(env, name="qcluster-redis").start()
    released = threading.Event()
    try:
        client = httpx.Client(base_url=web.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=30)
        assert client.post("/v1/agents", json={"name": "far"}).status_code == 201
        done = client.post("/v1/agents/far/run", json={"input": "first", "background": True}).json()
        wait_for(lambda: client.get(f"/v1/agents/runs/{done['runId']}").json()["status"] == "ok", timeout=30, message=f"the first run\n{cluster.log()[-3000:]}")

        upstream.script(Reply(hold=released, content="too late"))
        held = client.post("/v1/agents/far/run", json={"input": "second"}, headers={"Prefer": "respond-async"}).json()
        wait_for(lambda: _executor_attached(org, held["sessionId"]), timeout=30, message=f"the second run to start\n{cluster.log()[-3000:]}")
        stopped = client.post(f"/v1/agents/sessions/{held['sessionId']}/stop", json={})
        released.set()  # the model answers; the loop then applies the stop before finishing
        wait_for(lambda: client.get(f"/v1/agents/runs/{held['runId']}").json()["status"] == "error", timeout=30, message="the stop")
        stopped_view = client.get(f"/v1/agents/runs/{held['runId']}").json()
    finally:
        released.set()
        cluster.stop()
        web.stop()
        redis.from_url(REDIS_URL).flushdb()

    assert stopped.status_code == 200 and stopped.json()["forwarded"] is True
    assert stopped_view["error"] == f"stopped by {org.slug}/{org.user.username}"
    assert [d.run_id for d in debits(org)] == [done["runId"]]  # the stopped run is not billed


def _executor_attached(org, session_id: str) -> bool:
    with org.context():
        return bool(Session.objects.filter(pk=session_id).exclude(executor_channel="").exists())


def test_without_redis_a_stop_posted_to_the_web_process_reaches_the_worker_through_the_log(make_org, upstream):
    """`make run`'s defaults: ORM broker, in-memory layer in each process (no shared bus).

    The web process cannot reach the worker's inbox, so it answers at once with
    `forwarded: false` (no 502 after a timeout); the worker drains the stop from the durable log.
    """
    org = make_org("memq")
    fund(org, 1000)
    env = {**_cluster_env(upstream), "AGENTS_CONTROL_POLL_SECONDS": "0.2"}
    web = LiveServer(env).start()
    cluster = QCluster(env, name="qcluster-memory").start()
    released = threading.Event()
    try:
        client = httpx.Client(base_url=web.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=30)
        assert client.post("/v1/agents", json={"name": "near"}).status_code == 201
        upstream.script(Reply(hold=released, content="too late"))
        held = client.post("/v1/agents/near/run", json={"input": "work", "background": True}).json()
        wait_for(lambda: _executor_attached(org, held["sessionId"]), timeout=30, message=f"the run to start\n{cluster.log()[-3000:]}")
        stopped = client.post(f"/v1/agents/sessions/{held['sessionId']}/stop", json={})
        released.set()
        wait_for(lambda: client.get(f"/v1/agents/runs/{held['runId']}").json()["status"] == "error", timeout=30, message=f"the stop\n{cluster.log()[-3000:]}")
        stopped_view = client.get(f"/v1/agents/runs/{held['runId']}").json()
    finally:
        released.set()
        cluster.stop()
        web.stop()

    assert stopped.status_code == 200 and stopped.json()["forwarded"] is False
    assert stopped_view["error"] == f"stopped by {org.slug}/{org.user.username}"
    assert debits(org) == []
