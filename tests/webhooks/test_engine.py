"""The one delivery engine (issue 32 item 3): the written retry schedule driven by a moved clock,
at-least-once with a stable webhook-id, dead after 24 h, a failing endpoint disabled, identity
agents' security alerts through it too."""

from __future__ import annotations

import pytest

from agents_site.vocabulary import DeliveryStatus
from identity.models import Delivery
from tests.identity.conftest import create_agent, pair
from tests.webhooks.conftest import create_endpoint, fund, make_agent, post
from webhooks import engine
from webhooks.models import Endpoint, EventDelivery
from webhooks.tasks import due_tick

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_delivery")]

SCHEDULE = [5, 30, 120, 600, 1800, 3600]


@pytest.fixture
def subscribed(org_a, receiver, upstream):
    fund(org_a)
    make_agent(org_a, "helper")
    endpoint = create_endpoint(org_a, receiver.url, events=["run.finished"])
    receiver.secret = endpoint["secret"]
    return endpoint


def _deliveries(org) -> list[EventDelivery]:
    with org.context():
        return list(EventDelivery.objects.order_by("id"))


def test_the_schedule_is_written_jittered_and_hourly_after_an_hour():
    for n, planned in enumerate(SCHEDULE + [3600] * 5, start=1):
        waits = {round(engine.retry_delay(n), 3) for _ in range(20)}
        assert all(planned * 0.9 <= w <= planned * 1.1 for w in waits) and len(waits) > 1  # jittered


def test_a_receiver_down_for_two_minutes_gets_every_event_once_after_it_recovers(org_a, subscribed, receiver, clock):
    receiver.mode = "down"
    run_ids = [post(org_a.client, "/v1/agents/helper/run", {"input": f"hi {i}"}).json()["id"] for i in range(3)]
    assert receiver.refused == 3  # the first attempt is made at once
    rows = _deliveries(org_a)
    assert {r.status for r in rows} == {DeliveryStatus.RETRYING}
    first_due = [(r.next_attempt_at - clock.now).total_seconds() for r in rows]
    assert all(4.5 - 0.1 <= d <= 5.5 for d in first_due)  # 5 s ± 10 %, not the minute tick
    due_tick()
    assert receiver.refused == 3  # nothing due yet
    elapsed = 0
    for wait in SCHEDULE[:3]:  # 5 s, 30 s, 2 min later: still down through ~2.5 minutes
        clock.advance(wait * 1.1 + 0.01)
        elapsed += wait * 1.1
        due_tick()
    assert receiver.refused == 3 * 4 and elapsed > 120 and receiver.received == []
    receiver.mode = "ok"
    clock.advance(600 * 1.1 + 1)
    due_tick()
    for _ in range(3):  # later ticks send nothing again
        clock.advance(3600 * 1.1 + 1)
        due_tick()
    ids = [got.headers["webhook-id"] for got in receiver.received]
    assert sorted(ids) == sorted(r.public_id for r in rows) and len(set(ids)) == 3  # once each, by webhook-id
    assert sorted(got.verified["data"]["id"] for got in receiver.received) == sorted(run_ids)
    assert all(got.error is None for got in receiver.received)
    assert {(r.status, r.attempts) for r in _deliveries(org_a)} == {(DeliveryStatus.SUCCEEDED, 5)}


def test_a_delivery_failing_for_24_hours_is_dead_and_its_endpoint_disabled(org_a, subscribed, receiver, clock):
    receiver.mode = "down"
    post(org_a.client, "/v1/agents/helper/run", {"input": "hi"})
    for _ in range(40):
        clock.advance(3600 * 1.1 + 1)
        due_tick()
    [row] = _deliveries(org_a)
    assert row.status == DeliveryStatus.DEAD and 20 <= row.attempts <= 30
    with org_a.context():
        endpoint = Endpoint.objects.get()
    assert endpoint.enabled is False and endpoint.disabled_reason == "failing"
    view = org_a.client.get(f"/v1/agents/webhooks/{subscribed['id']}").json()
    assert view["enabled"] is False and view["disabledReason"] == "failing"
    # Disabled: the next run's event is not delivered to it; enabling it again clears the alert.
    post(org_a.client, "/v1/agents/helper/run", {"input": "again"})
    assert len(_deliveries(org_a)) == 1
    again = org_a.client.patch(f"/v1/agents/webhooks/{subscribed['id']}", '{"enabled": true}', content_type="application/json").json()
    assert again["enabled"] is True and "disabledReason" not in again and "failingSince" not in again


def test_a_success_ends_the_failing_streak(org_a, subscribed, receiver, clock):
    receiver.mode = "down"
    post(org_a.client, "/v1/agents/helper/run", {"input": "hi"})
    with org_a.context():
        assert Endpoint.objects.get().failing_since is not None
    receiver.mode = "ok"
    clock.advance(6)
    due_tick()
    with org_a.context():
        assert Endpoint.objects.get().failing_since is None


@pytest.mark.parametrize("emergency, code", [(False, "agent.token_rotated"), (True, "agent.token_revoked")])
def test_a_webhook_identity_agent_gets_its_security_alert_through_the_engine(org_a, receiver, emergency, code):
    agent = create_agent(org_a.client, connection_mode="webhook", webhook_url=receiver.url).json()
    both = pair(org_a.client, org_a.user.get_username(), agent, webhook=True)
    receiver.secret = both.agent_keys.webhook_secret
    response = post(org_a.client, f"/v1/identity/agents/{agent['agent_id']}/token/regenerate", {"emergency": emergency})
    assert response.status_code == 200, response.content
    [got] = receiver.received
    assert got.error is None  # signed with the secret the agent registered (after an emergency: the one it had)
    assert got.verified["type"] == "security_alert" and got.verified["data"]["code"] == code
    assert got.verified["data"]["agent_id"] == agent["agent_id"]
    with org_a.context():
        row = Delivery.objects.get(public_id=got.headers["webhook-id"])
    assert row.status == DeliveryStatus.SUCCEEDED and row.envelope_id is None
    log = org_a.client.get(f"/v1/identity/agents/{agent['agent_id']}/deliveries").json()["deliveries"]
    assert log[0]["type"] == "security_alert" and log[0]["envelope_id"] is None


def test_a_websocket_identity_agent_gets_no_webhook_alert(org_a, receiver):
    agent = create_agent(org_a.client).json()
    pair(org_a.client, org_a.user.get_username(), agent)
    post(org_a.client, f"/v1/identity/agents/{agent['agent_id']}/token/regenerate", {"emergency": False})
    with org_a.context():
        assert Delivery.objects.count() == 0
    assert receiver.received == []


def test_on_threads_a_slow_origin_holds_at_most_two_threads_and_its_queue_drains(org_a, subscribed, receiver, settings, monkeypatch):
    """Three deliveries to one origin handed to the webhook threads at once: two are attempted, the
    third waits in the origin's queue of this process and starts when one ends (issue 52), not at the tick."""
    settings.AGENTS_WEBHOOK_THREADS = 4
    from webhooks import services

    monkeypatch.setattr(engine, "enqueue", lambda *a, **k: None)  # only the dispatch below
    with org_a.context():
        endpoint = Endpoint.objects.get()
        rows = services.deliveries_create(endpoints_and_urls=[(endpoint, endpoint.url)] * 3, event_type="webhook.test", data={})
    receiver.mode = "slow"
    receiver.slow_seconds = 0.2
    assert engine.dispatch(org_a.slug, "org", [r.public_id for r in rows]) == 3
    assert engine.idle(timeout=60)
    assert engine.queued_count() == {} and receiver.max_active <= 2
    statuses = sorted(r.status for r in _deliveries(org_a))
    assert statuses == ["succeeded"] * 3 and len(receiver.received) == 3


def test_a_receiver_answering_410_gone_disables_its_endpoint_and_ends_its_deliveries(org_a, subscribed, receiver, clock):
    receiver.mode = "down"
    post(org_a.client, "/v1/agents/helper/run", {"input": "first"})  # 503: retrying
    [waiting] = _deliveries(org_a)
    assert waiting.status == DeliveryStatus.RETRYING
    receiver.mode = "gone"
    post(org_a.client, "/v1/agents/helper/run", {"input": "second"})
    rows = {r.public_id: r for r in _deliveries(org_a)}
    gone = next(r for r in rows.values() if r.public_id != waiting.public_id)
    assert (gone.status, gone.attempts, gone.last_status_code) == (DeliveryStatus.DEAD, 1, 410)  # never retried
    assert rows[waiting.public_id].status == DeliveryStatus.DEAD and "410" in rows[waiting.public_id].last_error
    view = org_a.client.get(f"/v1/agents/webhooks/{subscribed['id']}").json()
    assert view["enabled"] is False and view["disabledReason"] == "gone"
    clock.advance(3600 * 2)
    due_tick()
    assert receiver.refused == 1 and len(_deliveries(org_a)) == 2  # nothing attempted again, no new delivery
