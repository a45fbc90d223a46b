"""A daphne and a cluster SIGKILLed mid-run and started again keep every promise of the soak
(issue 51 item 3): the PostgreSQL pass's deterministic kill-and-restart, bounded by operation
count — `make soak` (bench/soak.py) is the same check at random, for minutes.

A daphne and a django-q2 cluster serve an org on PostgreSQL + Redis; two synchronous and two
background runs are in flight (their model answers held), a session has events, an endpoint hears
`run.finished`. Both processes are SIGKILLed; the model answers are released to nobody; both are
started again, and a fixed set of operations follows. Then: the four runs in flight ended
`error` "worker lost" (the restarted cluster's start-up sweep: their processes are gone), the rest
`ok`; every org balance is its ledger's sum and every ok run was debited once; one delivery per
(event, endpoint), each received; event seq dense; no answer ≥ 500; no fault in the logs.
"""

from __future__ import annotations

import os
import threading
import time

import httpx
import pytest
import redis

from runs.models import Run
from runs.recovery import WORKER_LOST
from tests.agents.conftest import fund, make_agent
from tests.support.live import free_port, server_env
from tests.support.soak import LOG_FORMAT, Process, Receiver, Tally, invariants, log_problems, violations
from tests.support.upstream import Reply
from tests.support.waiting import wait_until
from webhooks.models import EventDelivery

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]

#: Broker and channel layer of the child processes: a Redis database of their own, flushed around the test.
REDIS_URL = os.environ.get("AGENTS_TEST_REDIS_KILL_URL", "redis://127.0.0.1:6379/13")


def _in_flight(org) -> int:
    with org.context():
        return Run.objects.filter(status__in=["queued", "running", "waiting"]).count()


def _settled(org) -> bool:
    with org.context():
        return not _in_flight(org) and not EventDelivery.objects.filter(status__in=["pending", "retrying"]).exists()


def test_a_killed_daphne_and_cluster_keep_every_promise(org_a, upstream, store_kind, tmp_path, settings):
    if store_kind != "postgres":
        pytest.skip("the scale-out mode's kill-and-restart: PostgreSQL + Redis (the SQLite mode's is tests/runs/test_background_cluster.py)")
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    broker = redis.Redis.from_url(REDIS_URL)
    broker.flushdb()
    fund(org_a, 10_000)
    make_agent(org_a, "worker")
    receiver = Receiver().start()
    created = org_a.client.post("/v1/agents/webhooks", {"url": receiver.url("/hook"), "events": ["run.finished"]}, content_type="application/json")
    assert created.status_code == 201, created.content
    receiver.secrets["/hook"] = created.json()["secret"]
    env = server_env({
        "INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "test-key", "AGENTS_DEFAULT_MODEL": "test-model",
        "REDIS_URL": REDIS_URL, "AGENTS_RUN_LEASE_SECONDS": "4", "AGENTS_Q_WORKERS": "2", "AGENTS_WEBHOOK_ALLOW_HOSTS": "127.0.0.1",
        # The default webhook threads and their per-origin queues (issue 52; inline attempts until then).
        "AGENTS_WEBHOOK_THREADS": "4", "AGENTS_LOG_LEVEL": "WARNING", "AGENTS_LOG_FORMAT": LOG_FORMAT,
    })
    daphne = Process("daphne", env, tmp_path / "daphne.log", port=free_port())
    cluster = Process("qcluster", env, tmp_path / "qcluster.log")
    tally, kills, resets = Tally(), [], []
    held = threading.Event()
    try:
        daphne.start()
        cluster.start()
        assert daphne.ready(), daphne.log_path.read_text()[-3000:]
        http = httpx.Client(base_url=daphne.url, headers={"Authorization": f"Bearer {org_a.key}"}, timeout=60)

        def post(op: str, path: str, body: dict) -> httpx.Response:
            response = http.post(path, json=body)
            tally.record(op, response.status_code, headers=response.headers, body=response.content)
            return response

        # In flight: two background runs taken by the cluster's workers, two synchronous runs, all at the model.
        upstream.script(*[Reply(hold=held, content="never heard") for _ in range(4)])
        for _ in range(2):
            assert post("background_run", "/v1/agents/worker/run", {"input": "bg", "background": True}).status_code == 202

        def sync_run() -> None:
            try:
                post("sync_run", "/v1/agents/worker/run", {"input": "sync"})
            except httpx.TransportError:
                resets.append("sync_run")  # its daphne was killed under it

        callers = [threading.Thread(target=sync_run, daemon=True) for _ in range(2)]
        for caller in callers:
            caller.start()
        session = post("session_create", "/v1/agents/sessions", {"agent": "log"}).json()["id"]
        for n in range(3):
            assert post("append", f"/v1/agents/sessions/{session}/events", {"kind": "message", "payload": {"n": n}}).status_code == 201
        with org_a.context():
            wait_until(lambda: Run.objects.filter(status="running").count() == 4, timeout=60, what="four runs at the model")

        kills.append(time.time())
        daphne.kill()
        cluster.kill()
        held.set()  # the model answers processes that are gone
        for caller in callers:
            caller.join(30)
        assert resets == ["sync_run", "sync_run"]

        daphne.start()
        cluster.start()
        assert daphne.ready(), daphne.log_path.read_text()[-3000:]
        with org_a.context():
            wait_until(lambda: Run.objects.filter(error=WORKER_LOST).count() == 4, timeout=60,
                       what="the restarted cluster's sweep to end the four runs")
        for _ in range(3):
            assert post("sync_run", "/v1/agents/worker/run", {"input": "after"}).status_code == 200
        for _ in range(2):
            assert post("background_run", "/v1/agents/worker/run", {"input": "after", "background": True}).status_code == 202
        for n in range(3, 6):
            assert post("append", f"/v1/agents/sessions/{session}/events", {"kind": "message", "payload": {"n": n}}).status_code == 201
        wait_until(lambda: _settled(org_a), timeout=60, what="every run ended and every delivery settled")
        http.close()
    finally:
        held.set()
        daphne.stop()
        cluster.stop()
        receiver.stop()
        broker.flushdb()
    report = invariants([org_a.slug], received=receiver.snapshot(), kills=kills)
    assert violations(report, tally, log_problems([daphne.log_path, cluster.log_path])) == []
    assert report["runs"] == {"error": 4, "ok": 5}
    assert report["deliveries"] == {"succeeded": 9} and report["webhookIds"] == 9 and receiver.failed_verification == 0
