"""Deleting a webhook endpoint while runs finish never fails either side (issue 51 item 1).

A run's finish writes its `run.finished` delivery to every subscribed endpoint in the finish's
own transaction; `DELETE /webhooks/{id}` deletes the endpoint with its deliveries. On PostgreSQL
(READ COMMITTED, the foreign key checked at commit) the two collided on
`webhooks_eventdelivery.endpoint_id`: a finish that read the endpoint before the delete committed
inserted a delivery for a row gone by its commit (the run answered 500 and stayed `running`), and a
delete that collected the endpoint's deliveries before a finish committed one failed its own
commit (the delete answered 500). The two interleavings are forced here step by step — each side
paused at the point the race needs, the other let through until it has finished or waits on a
row lock — so they reproduce on every run, not by luck. Decision 1510 says what a finish does
with an endpoint deleted under it: it skips it (no delivery to an endpoint that no longer exists).

SQLite takes the write lock at `BEGIN IMMEDIATE`, so there the two never interleave: the paced
tests are for the PostgreSQL pass; the burst at the end holds on both stores.
"""

from __future__ import annotations

import json
import threading

import psycopg
import pytest
from django.db import connections
from django.db.models import deletion
from django.test import Client

from runs.models import Run
from tests.support.waiting import wait_until
from tests.webhooks.conftest import create_endpoint, fund, make_agent
from webhooks import selectors
from webhooks.models import Endpoint, EventDelivery

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def _postgres_only(store_kind):
    if store_kind != "postgres":
        pytest.skip("SQLite serialises every write transaction at BEGIN IMMEDIATE: the interleaving cannot happen there")


def _org_database(org) -> str:
    with org.context() as alias:
        return connections[alias].settings_dict["NAME"]


def _waits_on_a_lock(database: str) -> bool:
    """Return True when a session of `database` waits for a row (or transaction) lock."""
    import os

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'", (database,)).fetchone()
    return bool(row[0])


class Side(threading.Thread):
    """One request in its own thread (its own connections), its answer kept."""

    def __init__(self, name: str, call) -> None:
        super().__init__(name=name, daemon=True)
        self.call = call
        self.status: int | None = None
        self.body = b""
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            response = self.call()
            self.status, self.body = response.status_code, response.content
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            connections.close_all()

    @property
    def done(self) -> bool:
        return not self.is_alive()


@pytest.fixture
def subscribed(org_a, upstream, receiver):
    fund(org_a)
    make_agent(org_a, "racer")
    endpoint = create_endpoint(org_a, receiver.url, events=["run.finished"])
    return endpoint


def _run(org):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {org.key}", raise_request_exception=False)
    return lambda: client.post("/v1/agents/racer/run", json.dumps({"input": "go"}), content_type="application/json")


def _delete(org, endpoint_id: str):
    client = Client(HTTP_AUTHORIZATION=f"Bearer {org.key}", raise_request_exception=False)
    return lambda: client.delete(f"/v1/agents/webhooks/{endpoint_id}")


def _settled(side: Side, database: str) -> bool:
    return side.done or _waits_on_a_lock(database)


def _assert_after(org, run_side: Side, delete_side: Side) -> None:
    assert run_side.error is None and delete_side.error is None, (run_side.error, delete_side.error)
    assert delete_side.status == 204, delete_side.body
    assert run_side.status == 200, run_side.body
    run_id = json.loads(run_side.body)["id"]
    with org.context():
        assert Run.objects.get(pk=run_id).status == "ok"
        assert not Endpoint.objects.exists()
        assert not EventDelivery.objects.exists()  # nothing outlives its endpoint


def test_an_endpoint_deleted_after_a_finish_read_it_is_skipped_by_that_finish(org_a, subscribed, monkeypatch, store_kind):
    """The finish reads the endpoint, the delete commits, then the finish writes its deliveries."""
    _postgres_only(store_kind)
    database = _org_database(org_a)
    read, go_on = threading.Event(), threading.Event()
    real = selectors.run_finished_reach

    def paused(**kwargs):
        found = real(**kwargs)
        if threading.current_thread().name == "run":
            read.set()
            assert go_on.wait(60), "never released"
        return found

    monkeypatch.setattr(selectors, "run_finished_reach", paused)
    run_side, delete_side = Side("run", _run(org_a)), Side("delete", _delete(org_a, subscribed["id"]))
    run_side.start()
    try:
        wait_until(read.is_set, timeout=60, what="the finish to read the endpoints")
        delete_side.start()
        wait_until(lambda: _settled(delete_side, database), timeout=60, what="the delete to finish or wait on the finish")
    finally:
        go_on.set()
    run_side.join(60)
    delete_side.join(60)
    _assert_after(org_a, run_side, delete_side)


def test_a_delivery_committed_while_the_delete_collected_does_not_fail_the_delete(org_a, subscribed, monkeypatch, store_kind):
    """The delete collects the endpoint's deliveries, a finish commits one, then the delete deletes."""
    _postgres_only(store_kind)
    database = _org_database(org_a)
    collected, go_on = threading.Event(), threading.Event()
    real = deletion.Collector.delete

    def paused(self):
        if threading.current_thread().name == "delete":
            collected.set()
            assert go_on.wait(60), "never released"
        return real(self)

    monkeypatch.setattr(deletion.Collector, "delete", paused)
    run_side, delete_side = Side("run", _run(org_a)), Side("delete", _delete(org_a, subscribed["id"]))
    delete_side.start()
    try:
        wait_until(collected.is_set, timeout=60, what="the delete to collect the endpoint's deliveries")
        run_side.start()
        wait_until(lambda: _settled(run_side, database), timeout=60, what="the run to finish or wait on the delete")
    finally:
        go_on.set()
    run_side.join(60)
    delete_side.join(60)
    _assert_after(org_a, run_side, delete_side)


def test_simultaneous_runs_and_deletes_all_answer(org_a, upstream, receiver):
    """Released together at a barrier: 3 runs and 3 deletes (of 3 endpoints) answer 200 and 204.

    Six request threads: on PostgreSQL each holds one of the test process's 4 org connections
    for its request (tests/conftest.py), so more would measure the pool's wait, not the race."""
    fund(org_a)
    make_agent(org_a, "racer")
    endpoints = [create_endpoint(org_a, f"{receiver.url}/{i}", events=["run.finished"])["id"] for i in range(3)]
    barrier = threading.Barrier(6)
    sides = [Side("run", _run(org_a)) for _ in range(3)] + [Side("delete", _delete(org_a, e)) for e in endpoints]
    for side in sides:
        call = side.call
        side.call = lambda call=call: (barrier.wait(60), call())[1]
        side.start()
    for side in sides:
        side.join(120)
    assert [s.error for s in sides] == [None] * 6
    assert sorted(s.status for s in sides) == [200] * 3 + [204] * 3, [(s.status, s.body[:200]) for s in sides]
    with org_a.context():
        assert sorted(Run.objects.values_list("status", flat=True)) == ["ok"] * 3
        assert not EventDelivery.objects.exists()


def _pending_delivery(org, endpoint_id: str) -> str:
    from webhooks import services

    with org.context():
        endpoint = Endpoint.objects.get(public_id=endpoint_id)
        (row,) = services.deliveries_create(endpoints_and_urls=[(endpoint, endpoint.url)], event_type="run.finished", data={},
                                            enqueue=False)
    return row.public_id


class Attempt(threading.Thread):
    """One engine attempt of a delivery in its own thread, what it returned or raised kept."""

    def __init__(self, org, delivery_id: str) -> None:
        super().__init__(name="attempt", daemon=True)
        self.org, self.delivery_id = org, delivery_id
        self.result, self.error = "unset", None

    def run(self) -> None:
        from webhooks import engine

        try:
            with self.org.context():
                self.result = engine.attempt("org", self.delivery_id)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            connections.close_all()


def test_an_endpoint_deleted_during_an_attempt_leaves_nothing_to_record(org_a, subscribed, monkeypatch, store_kind):
    """The attempt POSTs, the delete commits meanwhile, then the attempt would record its outcome."""
    _postgres_only(store_kind)
    from webhooks import engine

    delivery_id = _pending_delivery(org_a, subscribed["id"])
    posted, go_on = threading.Event(), threading.Event()
    real = engine.post

    def paused(**kwargs):
        answer = real(**kwargs)
        posted.set()
        assert go_on.wait(60), "never released"
        return answer

    monkeypatch.setattr(engine, "post", paused)
    attempt, delete_side = Attempt(org_a, delivery_id), Side("delete", _delete(org_a, subscribed["id"]))
    attempt.start()
    try:
        wait_until(posted.is_set, timeout=60, what="the attempt's POST")
        delete_side.start()
        delete_side.join(60)
    finally:
        go_on.set()
    attempt.join(60)
    assert delete_side.status == 204, delete_side.body
    assert attempt.error is None and attempt.result is None  # nothing left to record, nothing raised
    with org_a.context():
        assert not EventDelivery.objects.exists() and not Endpoint.objects.exists()


def test_a_delete_waits_for_an_attempt_being_recorded(org_a, subscribed, monkeypatch, store_kind):
    """The attempt is recording its outcome when the delete comes: the delete takes the attempt row too."""
    _postgres_only(store_kind)
    from webhooks import engine

    database = _org_database(org_a)
    delivery_id = _pending_delivery(org_a, subscribed["id"])
    recording, go_on = threading.Event(), threading.Event()
    channel = engine.channel("org")
    real = channel.after_attempt

    def paused(delivery, ok, at):
        real(delivery, ok, at)
        recording.set()
        assert go_on.wait(60), "never released"

    monkeypatch.setitem(engine._channels, "org", engine.Channel(**{**channel.__dict__, "after_attempt": paused}))
    attempt, delete_side = Attempt(org_a, delivery_id), Side("delete", _delete(org_a, subscribed["id"]))
    attempt.start()
    try:
        wait_until(recording.is_set, timeout=60, what="the attempt to record its outcome")
        delete_side.start()
        wait_until(lambda: _settled(delete_side, database), timeout=60, what="the delete to finish or wait on the attempt")
    finally:
        go_on.set()
    attempt.join(60)
    delete_side.join(60)
    assert attempt.error is None and attempt.result is not None and attempt.result.status == "succeeded"
    assert delete_side.status == 204, delete_side.body
    with org_a.context():
        assert not EventDelivery.objects.exists() and not Endpoint.objects.exists()


def test_a_callback_whose_endpoint_is_deleted_as_the_run_starts_is_dropped(org_a, subscribed, receiver, monkeypatch, store_kind):
    """The request's callback is checked, the delete commits, then the run's start records the callback."""
    _postgres_only(store_kind)
    from runs import hooks
    from webhooks.models import RunCallback

    checked, go_on = threading.Event(), threading.Event()
    real = hooks.run_started_handlers

    def paused(run):
        if threading.current_thread().name == "run":
            checked.set()
            assert go_on.wait(60), "never released"
        return real(run)

    monkeypatch.setattr(hooks, "run_started_handlers", paused)
    client = Client(HTTP_AUTHORIZATION=f"Bearer {org_a.key}", raise_request_exception=False)
    run_side = Side("run", lambda: client.post("/v1/agents/racer/run", json.dumps({"input": "go", "webhook": f"{receiver.url}/cb"}),
                                               content_type="application/json"))
    delete_side = Side("delete", _delete(org_a, subscribed["id"]))
    run_side.start()
    try:
        wait_until(checked.is_set, timeout=60, what="the run's start to reach its handlers")
        delete_side.start()
        delete_side.join(60)
    finally:
        go_on.set()
    run_side.join(60)
    assert delete_side.status == 204, delete_side.body
    _assert_after(org_a, run_side, delete_side)
    with org_a.context():
        assert not RunCallback.objects.exists()
