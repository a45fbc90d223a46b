"""Webhooks drain at once (issue 52): a queue per receiver origin in each process, fast retries on
their own timer, the minute tick only a catch-up, and a 2xx that makes an origin's waiting retries
due now.

Against real loopback receivers (`tests.webhooks.conftest.Receiver`, each POST verified with
`standardwebhooks`) and the engine's webhook threads (`AGENTS_WEBHOOK_THREADS` = 4); every wait
is on a condition (`engine.idle`, `wait_until`), never a duration, and no assertion is a timing.
The recovery's rules are checked with the engine's clock moved by hand (`clock`), attempts inline.
"""

from __future__ import annotations

import pytest

from agents_site.vocabulary import DeliveryStatus
from tests.support.waiting import wait_until
from tests.webhooks.conftest import Receiver, create_endpoint
from toolkit import outbound
from webhooks import engine, services
from webhooks.models import Endpoint, EventAttempt, EventDelivery
from webhooks.tasks import due_tick

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


@pytest.fixture
def threads(settings, monkeypatch):
    """Attempts on the process's webhook threads; nothing goes through the task queue unless a test says so."""
    settings.AGENTS_WEBHOOK_THREADS = 4
    queued: list[tuple[str, str, list[str]]] = []
    monkeypatch.setattr(engine, "enqueue", lambda org, channel_name, ids: queued.append((org, channel_name, list(ids))))
    return queued


def _endpoint(org, receiver) -> Endpoint:
    view = create_endpoint(org, receiver.url, events=["run.finished"])
    receiver.secret = view["secret"]
    with org.context():
        return Endpoint.objects.get(public_id=view["id"])


def _deliveries(org, endpoint: Endpoint, n: int) -> list[str]:
    """Write `n` due deliveries of a `webhook.test` event to `endpoint` (none queued); return their ids, in order."""
    with org.context():
        rows = services.deliveries_create(endpoints_and_urls=[(endpoint, endpoint.url)] * n, event_type="webhook.test",
                                          data={"n": n}, enqueue=False)
    return [row.public_id for row in rows]


def _rows(org, ids=None) -> dict[str, EventDelivery]:
    with org.context():
        query = EventDelivery.objects.all() if ids is None else EventDelivery.objects.filter(public_id__in=ids)
        return {row.public_id: row for row in query}


def _received_ids(receiver) -> list[str]:
    assert all(got.error is None for got in receiver.received)
    return [got.headers["webhook-id"] for got in receiver.received]


def test_more_deliveries_than_the_cap_all_go_at_once_never_more_than_two_in_flight(org_a, receiver, threads):
    endpoint = _endpoint(org_a, receiver)
    ids = _deliveries(org_a, endpoint, 12)
    receiver.mode, receiver.slow_seconds = "slow", 0.05  # each attempt holds its thread a moment
    assert engine.dispatch(org_a.slug, "org", ids) == 12  # every one taken, none left for the tick
    assert engine.idle(timeout=60)
    assert sorted(_received_ids(receiver)) == sorted(ids)  # each once
    assert {row.status for row in _rows(org_a, ids).values()} == {DeliveryStatus.SUCCEEDED}
    assert receiver.max_active <= engine.MAX_IN_FLIGHT_PER_ORIGIN
    assert engine.queued_count() == {} and threads == []  # nothing waits, nothing went back to the task queue
    assert due_tick()["done"] == 0  # the tick finds nothing to catch up


def test_an_origins_attempts_go_on_kept_connections_each_signed(org_a, settings, threads):
    """A receiver keeping connections open gets a drain on a few connections, not one per delivery."""
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    kept = Receiver(keep_alive=True).start()
    try:
        endpoint = _endpoint(org_a, kept)
        ids = _deliveries(org_a, endpoint, 12)
        assert engine.dispatch(org_a.slug, "org", ids) == 12
        assert engine.idle(timeout=60)
        assert sorted(_received_ids(kept)) == sorted(ids)  # each once, each verified
        assert {row.status for row in _rows(org_a, ids).values()} == {DeliveryStatus.SUCCEEDED}
        assert len({got.peer for got in kept.received}) < len(ids)  # connections were reused
        assert kept.max_active <= engine.MAX_IN_FLIGHT_PER_ORIGIN
    finally:
        outbound.kept.close()
        kept.stop()


def test_one_origins_deliveries_start_in_the_order_they_were_handed_on(org_a, receiver, threads, monkeypatch):
    monkeypatch.setattr(engine, "MAX_IN_FLIGHT_PER_ORIGIN", 1)  # one at a time: arrival order = start order
    endpoint = _endpoint(org_a, receiver)
    ids = _deliveries(org_a, endpoint, 8)
    order = ids[::2] + ids[1::2]
    assert engine.dispatch(org_a.slug, "org", order) == 8
    assert engine.idle(timeout=60)
    assert _received_ids(receiver) == order


def test_a_delivery_queued_or_running_here_is_not_queued_twice(org_a, receiver, threads):
    endpoint = _endpoint(org_a, receiver)
    ids = _deliveries(org_a, endpoint, 4)
    receiver.mode = "hold"
    assert engine.dispatch(org_a.slug, "org", ids) == 4
    wait_until(lambda: len(receiver.received) == 2, what="two attempts held by the receiver")
    assert engine.dispatch(org_a.slug, "org", ids[2:]) == 0  # already queued here
    assert engine.dispatch(org_a.slug, "org", ids[:2]) == 2  # running: queued again once they end (then not due: skipped)
    receiver.release.set()
    assert engine.idle(timeout=60)
    assert sorted(_received_ids(receiver)) == sorted(ids)
    assert {(row.status, row.attempts) for row in _rows(org_a, ids).values()} == {(DeliveryStatus.SUCCEEDED, 1)}


def test_a_stalled_receiver_never_blocks_another_origin(org_a, receiver, second_receiver, threads):
    stalled, healthy = _endpoint(org_a, receiver), _endpoint(org_a, second_receiver)
    receiver.mode = "hold"  # answers only when released
    stuck = _deliveries(org_a, stalled, 5)
    fine = _deliveries(org_a, healthy, 10)
    assert engine.dispatch(org_a.slug, "org", stuck + fine) == 15
    wait_until(lambda: len(second_receiver.received) == 10, what="the healthy origin's ten deliveries")
    wait_until(lambda: sum(engine.queued_count().values()) == 5, what="the healthy origin's attempts recorded")
    assert len(receiver.received) == engine.MAX_IN_FLIGHT_PER_ORIGIN  # two held, three waiting in its queue
    assert {row.status for i, row in _rows(org_a, fine).items()} == {DeliveryStatus.SUCCEEDED}
    receiver.release.set()
    assert engine.idle(timeout=60)
    assert sorted(_received_ids(receiver)) == sorted(stuck)
    assert {row.status for row in _rows(org_a).values()} == {DeliveryStatus.SUCCEEDED}


def test_a_fast_retry_fires_at_its_due_time_on_the_process_timer(org_a, receiver, threads, settings, clock):
    settings.AGENTS_WEBHOOK_FAST_RETRY_SECONDS = 60
    endpoint = _endpoint(org_a, receiver)
    [delivery_id] = _deliveries(org_a, endpoint, 1)
    receiver.mode = "down"
    engine.dispatch(org_a.slug, "org", [delivery_id])
    assert engine.idle(timeout=60) and receiver.refused == 1
    row = _rows(org_a)[delivery_id]
    assert row.status == DeliveryStatus.RETRYING
    receiver.mode = "ok"
    clock.advance((row.next_attempt_at - clock.now).total_seconds() - 0.5)
    assert engine.fire_due_timers() == 0  # half a second early: nothing
    clock.advance(1)
    engine.fire_due_timers()  # due now (the timer thread may have taken it first: one of them does)
    wait_until(lambda: _rows(org_a)[delivery_id].status == DeliveryStatus.SUCCEEDED, what="the retry")
    assert engine.idle(timeout=60)
    assert _received_ids(receiver) == [delivery_id] and _rows(org_a)[delivery_id].attempts == 2
    assert threads == []  # not through the task queue nor the tick


def test_a_retry_of_an_attempt_made_outside_the_webhook_threads_goes_to_the_task_queue(org_a, receiver, threads, settings, clock):
    """The console's "send a test event" attempts in the web request: its retry is a task for a worker, not an attempt in the web process."""
    settings.AGENTS_WEBHOOK_FAST_RETRY_SECONDS = 60
    endpoint = _endpoint(org_a, receiver)
    [delivery_id] = _deliveries(org_a, endpoint, 1)
    receiver.mode = "down"
    with org_a.context():
        engine.attempt("org", delivery_id, force=True)
    clock.advance(10)
    engine.fire_due_timers()
    wait_until(lambda: threads, what="the retry handed to the task queue")
    assert threads == [(org_a.slug, "org", [delivery_id])] and receiver.refused == 1
    assert engine.queued_count() == {}


def test_the_tick_catches_up_what_a_lost_process_held(org_a, receiver, threads, settings):
    endpoint = _endpoint(org_a, receiver)
    ids = _deliveries(org_a, endpoint, 5)  # written, their task lost with its process
    assert due_tick()["done"] == 5
    [(org, channel_name, handed)] = threads
    assert org == org_a.slug and channel_name == "org" and handed == ids  # due order
    engine.dispatch(org, channel_name, handed)
    assert engine.idle(timeout=60)
    assert sorted(_received_ids(receiver)) == sorted(ids)


# --- recovery: a 2xx makes the origin's waiting retries due now ---------------------------------


@pytest.fixture
def inline(inline_delivery):
    """Attempts inline (what a django-q2 worker does with `AGENTS_WEBHOOK_THREADS` = 0)."""


def _backlog(org, endpoint, clock, n: int) -> list[str]:
    """`n` deliveries failed through about three minutes of outage: each retrying, at back-offs of 2-10 minutes."""
    ids = []
    for _ in range(n):
        ids += _deliveries(org, endpoint, 1)
        engine.dispatch(org.slug, "org", ids[-1:])
        clock.advance(20)
        due_tick()
    return ids


def test_a_2xx_makes_the_origins_waiting_retries_due_now_and_sends_them(org_a, receiver, second_receiver, inline, clock):
    endpoint, other = _endpoint(org_a, receiver), _endpoint(org_a, second_receiver)
    receiver.mode = second_receiver.mode = "down"
    waited = _backlog(org_a, endpoint, clock, 9)
    elsewhere = _backlog(org_a, other, clock, 2)
    before = _rows(org_a)
    assert {before[i].status for i in waited + elsewhere} == {DeliveryStatus.RETRYING}
    assert all(before[i].next_attempt_at > clock.now for i in waited)  # each still waiting out its back-off
    attempts_before = {i: before[i].attempts for i in waited}
    receiver.mode = "ok"
    [fresh] = _deliveries(org_a, endpoint, 1)
    engine.dispatch(org_a.slug, "org", [fresh])  # the receiver answers 2xx: what waited goes now, no clock moved
    after = _rows(org_a)
    assert {after[i].status for i in waited + [fresh]} == {DeliveryStatus.SUCCEEDED}
    assert sorted(_received_ids(receiver)) == sorted(waited + [fresh])  # each once
    assert all(after[i].attempts == attempts_before[i] + 1 for i in waited)  # one more attempt each, no count reset
    # The other origin is untouched: still waiting, due when it was.
    assert {(after[i].status, after[i].next_attempt_at) for i in elsewhere} == {(b.status, b.next_attempt_at) for b in
                                                                                 (before[i] for i in elsewhere)}


def test_recovery_leaves_an_attempt_in_flight_alone(org_a, receiver, inline, clock):
    endpoint = _endpoint(org_a, receiver)
    receiver.mode = "down"
    first, second = _backlog(org_a, endpoint, clock, 2)
    clock.advance(3600)
    with org_a.context():
        claimed = engine._claim(engine.channel("org"), first, force=False)  # being attempted by some worker: its lease
        assert claimed is not None
        lease = EventDelivery.objects.get(public_id=first).next_attempt_at
        clock.advance(-3590)  # back before the other one's retry is due
        assert EventDelivery.objects.get(public_id=second).next_attempt_at > clock.now
        recovered = engine.recover_origin(endpoint.url)
        assert recovered == {"org": [second]}
        assert EventDelivery.objects.get(public_id=first).next_attempt_at == lease
        assert EventDelivery.objects.get(public_id=second).next_attempt_at == clock.now
        assert EventAttempt.objects.filter(delivery__public_id=first).count() == claimed.attempts - 1


def test_a_healthy_origins_2xx_costs_no_recovery_query(org_a, receiver, inline, monkeypatch):
    endpoint = _endpoint(org_a, receiver)
    calls = []
    real = engine.recover_origin
    monkeypatch.setattr(engine, "recover_origin", lambda url: calls.append(url) or real(url))
    engine.dispatch(org_a.slug, "org", _deliveries(org_a, endpoint, 3))
    assert calls == [] and len(receiver.received) == 3  # never failed here, first attempts: nothing can wait
    receiver.mode = "down"
    engine.dispatch(org_a.slug, "org", _deliveries(org_a, endpoint, 1))
    receiver.mode = "ok"
    engine.dispatch(org_a.slug, "org", _deliveries(org_a, endpoint, 2))
    assert len(calls) == 2  # the failure seen, recovery made due (and sent) the waiting one; then nothing waits
    assert {row.status for row in _rows(org_a).values()} == {DeliveryStatus.SUCCEEDED}
    engine.dispatch(org_a.slug, "org", _deliveries(org_a, endpoint, 2))
    assert len(calls) == 2
