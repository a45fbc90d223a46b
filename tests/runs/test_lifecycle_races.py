"""Races the run lifecycle must win on both stores: one Idempotency-Key, the last fee.

Each test runs against SQLite org files and against real PostgreSQL org databases
(127.0.0.1:5432), where READ COMMITTED alone would let a count-then-insert pass twice.
"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connections
from django.test import Client

from tests.agents.conftest import debits, fund, make_agent, stored_runs
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8


@pytest.fixture(params=["sqlite", "postgres"])
def store_org(request, make_org):
    """An org whose store is a SQLite file or a PostgreSQL database (dropped afterwards)."""
    if request.param == "postgres":
        created = request.getfixturevalue("postgres_orgs")
        org = make_org("race")
        created.append(org.slug)
        return org
    return make_org("race")


def _simultaneously(org, body: dict, *, headers: dict, count: int = THREADS) -> list:
    """POST /v1/agents/racer/run `count` times at once; return the responses."""
    barrier = threading.Barrier(count)
    responses: list = []
    lock = threading.Lock()

    def call() -> None:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {org.key}", **headers)
        barrier.wait()
        try:
            response = client.post("/v1/agents/racer/run", json.dumps(body), content_type="application/json")
        finally:
            connections.close_all()
        with lock:
            responses.append(response)

    threads = [threading.Thread(target=call) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, responses


def _wait_for(predicate, seconds: float = 30.0) -> None:
    event = threading.Event()
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return
        event.wait(0.02)
    raise AssertionError("condition not reached in time")


def test_one_idempotency_key_sent_by_eight_requests_at_once_runs_once(store_org, upstream):
    fund(store_org, 1000)
    make_agent(store_org, "racer")
    released = threading.Event()
    upstream.script(*[Reply(hold=released, content="once") for _ in range(THREADS)])
    threads, responses = _simultaneously(store_org, {"input": "go"}, headers={"HTTP_IDEMPOTENCY_KEY": "same-key"})
    # Every request but the executing one answers while the run is in flight.
    _wait_for(lambda: len(responses) >= THREADS - 1)
    released.set()
    for thread in threads:
        thread.join(30)
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200] + [409] * (THREADS - 1), [r.content for r in responses]
    assert {r.json()["code"] for r in responses if r.status_code == 409} == {"idempotency_in_progress"}
    assert len(upstream.chat_requests) == 1
    [run] = stored_runs(store_org)
    assert run.status == "ok" and [d.run_id for d in debits(store_org)] == [run.id]
    replay = store_org.client.post("/v1/agents/racer/run", json.dumps({"input": "go"}), content_type="application/json",
                                   HTTP_IDEMPOTENCY_KEY="same-key")
    assert (replay.status_code, replay.json()["id"], replay["Idempotent-Replayed"]) == (200, run.id, "true")


def test_one_idempotency_key_sent_by_eight_background_requests_at_once_queues_once(store_org, upstream):
    fund(store_org, 1000)
    make_agent(store_org, "racer")
    threads, responses = _simultaneously(store_org, {"input": "go", "background": True}, headers={"HTTP_IDEMPOTENCY_KEY": "bg-key"})
    for thread in threads:
        thread.join(30)
    assert [r.status_code for r in responses] == [202] * THREADS, [r.content for r in responses]
    assert len({r.json()["runId"] for r in responses}) == 1
    assert sorted(r.get("Idempotent-Replayed", "") for r in responses) == [""] + ["true"] * (THREADS - 1)
    assert [r.status for r in stored_runs(store_org)] == ["queued"]


def test_simultaneous_runs_cannot_share_the_last_fee_on_either_store(store_org, upstream):
    fund(store_org, 100)  # exactly one fee
    make_agent(store_org, "racer")
    released = threading.Event()
    upstream.script(*[Reply(hold=released, content="done") for _ in range(THREADS)])
    threads, responses = _simultaneously(store_org, {"input": "go"}, headers={})
    _wait_for(lambda: len(responses) >= THREADS - 1)
    released.set()
    for thread in threads:
        thread.join(30)
    assert sorted(r.status_code for r in responses) == [200] + [402] * (THREADS - 1)
    assert len(debits(store_org)) == 1
    assert [r.status for r in stored_runs(store_org)] == ["ok"]
