"""Relations, envelopes, inbox and signed webhook delivery with retries (spec 001)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agents_site.vocabulary import DeliveryStatus
from identity import delivery as delivery_module
from identity.models import Delivery, Envelope, InboxItem
from identity.tasks import deliveries_tick
from tests.identity.conftest import AgentKeys, bearer, create_agent, envelope, post

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


@pytest.fixture
def webhook_agent(org_a, receiver, settings):
    """A webhook identity agent of org_a with real keys registered, pointed at the receiver."""
    settings.AGENTS_WEBHOOK_RETRY_BASE_SECONDS = 0  # every retry is due at once (no waiting in tests)
    keys = AgentKeys()
    created = create_agent(org_a.client, connection_mode="webhook", webhook_url=receiver.url).json()
    registered = post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/keys/register", keys.body(webhook=True), **bearer(created["agent_token"]))
    assert registered.status_code == 200, registered.json()
    receiver.secret = keys.webhook_secret
    return created


def _send(org, agent_id, body=None):
    return post(org.client, f"/v1/identity/agents/{agent_id}/messages", {"envelope": body or envelope()})


def test_users_envelope_is_delivered_by_a_signed_webhook(org_a, webhook_agent, receiver, sync_tasks):
    sealed = envelope(300)
    response = _send(org_a, webhook_agent["agent_id"], sealed)
    assert response.status_code == 202, response.json()
    assert len(receiver.received) == 1
    got = receiver.received[0]
    assert got.error is None, got.error  # verified by the standardwebhooks library
    assert got.verified["type"] == "envelope.created"
    assert got.verified["data"]["envelope"] == sealed
    assert got.verified["data"]["envelope_id"] == response.json()["envelope_id"]
    assert got.headers["webhook-id"] == response.json()["delivery_id"]
    assert set(got.verified) == {"type", "timestamp", "data"}
    log = org_a.client.get(f"/v1/identity/agents/{webhook_agent['agent_id']}/deliveries").json()["deliveries"]
    assert log[0]["status"] == "succeeded" and log[0]["attempts"] == 1
    assert log[0]["attempt_log"][0]["status_code"] == 204


@pytest.mark.parametrize("mode", ["fail", "redirect", "slow"])
def test_failing_receiver_is_retried_then_dead_lettered_and_replayable(org_a, webhook_agent, receiver, sync_tasks, settings, mode):
    settings.AGENTS_WEBHOOK_MAX_ATTEMPTS = 3
    settings.AGENTS_WEBHOOK_TIMEOUT_SECONDS = 0.5
    receiver.slow_seconds = 1.5
    receiver.mode = mode
    response = _send(org_a, webhook_agent["agent_id"])
    delivery_id = response.json()["delivery_id"]
    with org_a.context():
        assert Delivery.objects.get(public_id=delivery_id).status == DeliveryStatus.RETRYING
    deliveries_tick()  # the minute tick queues every due retry
    deliveries_tick()
    with org_a.context():
        row = Delivery.objects.get(public_id=delivery_id)
        assert row.status == DeliveryStatus.DEAD and row.attempts == 3
        assert Envelope.objects.filter(public_id=response.json()["envelope_id"]).exists()  # nothing lost
    assert len(receiver.received) == 3
    assert all(r.headers["webhook-id"] == delivery_id for r in receiver.received)  # same id on every retry
    deliveries_tick()  # a dead delivery is never attempted again
    assert len(receiver.received) == 3
    log = org_a.client.get(f"/v1/identity/agents/{webhook_agent['agent_id']}/deliveries?status=dead").json()["deliveries"]
    assert [d["delivery_id"] for d in log] == [delivery_id]
    assert len(log[0]["attempt_log"]) == 3 and log[0]["last_error"]
    # The creator replays it once the receiver is fixed.
    receiver.mode = "ok"
    replay = post(org_a.client, f"/v1/identity/deliveries/{delivery_id}/replay")
    assert replay.status_code == 202, replay.json()
    assert receiver.received[-1].error is None
    assert receiver.received[-1].verified["data"]["envelope_id"] == response.json()["envelope_id"]
    with org_a.context():
        assert Delivery.objects.get(public_id=replay.json()["delivery_id"]).status == DeliveryStatus.SUCCEEDED


def test_delivery_waits_for_keys_and_a_private_address_is_refused(org_a, settings, sync_tasks):
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    created = create_agent(org_a.client, connection_mode="webhook", webhook_url="http://127.0.0.1:9/hook").json()
    response = _send(org_a, created["agent_id"])
    with org_a.context():
        row = Delivery.objects.get(public_id=response.json()["delivery_id"])
        assert row.status == DeliveryStatus.RETRYING and "no webhook secret" in row.last_error
    # The allow-list is withdrawn: the loopback address is refused at delivery time.
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = []
    post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/keys/register", AgentKeys().body(webhook=True), **bearer(created["agent_token"]))
    with org_a.context():
        delivery_module.delivery_attempt(delivery_id=row.public_id, force=True)
        assert "refused destination" in Delivery.objects.get(pk=row.pk).last_error


def test_backoff_is_exponential_and_capped(settings):
    settings.AGENTS_WEBHOOK_RETRY_BASE_SECONDS = 30
    settings.AGENTS_WEBHOOK_RETRY_MAX_SECONDS = 200
    assert [delivery_module.backoff_seconds(n) for n in range(1, 6)] == [30, 60, 120, 200, 200]


def test_envelope_over_256_kib_is_413_and_not_stored(org_a, settings):
    created = create_agent(org_a.client).json()
    too_big = envelope(256 * 1024 + 1)
    response = _send(org_a, created["agent_id"], too_big)
    assert response.status_code == 413 and response.json()["code"] == "payload_too_large"
    assert _send(org_a, created["agent_id"], envelope(256 * 1024)).status_code == 202
    bad = post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/messages", {"envelope": "%%%"})
    assert bad.status_code == 400
    with org_a.context():
        assert Envelope.objects.count() == 1


def test_relations_user_context_and_agent_to_user_messages(org_a, make_org):
    from tenancy.services import api_key_create, membership_set

    first = create_agent(org_a.client, custom_id="first_agent").json()
    second = create_agent(org_a.client, custom_id="second_agent").json()
    user = org_a.user.get_username()
    # No relation yet: the agent cannot see the user's context or write to them.
    context = f"/v1/identity/agents/{first['agent_id']}/user-context/{user}/agents"
    assert org_a.client.get(context, **bearer(first["agent_token"])).status_code == 404
    sent = post(org_a.client, f"/v1/identity/users/{user}/messages", {"envelope": envelope()}, **bearer(first["agent_token"]))
    assert sent.status_code == 404
    added = post(org_a.client, f"/v1/identity/agents/{first['agent_id']}/relations")
    assert added.status_code == 201 and added.json()["status"] == "active"
    assert post(org_a.client, f"/v1/identity/agents/{first['agent_id']}/relations").status_code == 200  # idempotent
    post(org_a.client, f"/v1/identity/agents/{second['agent_id']}/relations")
    answer = org_a.client.get(context, **bearer(first["agent_token"]))
    assert answer.status_code == 200
    assert sorted(a["custom_id"] for a in answer.json()["agents"]) == ["first_agent", "second_agent"]
    # Another agent's token on this agent's route: 403.
    assert org_a.client.get(context, **bearer(second["agent_token"])).status_code == 403
    sealed = envelope(100)
    sent = post(org_a.client, f"/v1/identity/users/{user}/messages", {"envelope": sealed}, **bearer(first["agent_token"]))
    assert sent.status_code == 201, sent.json()
    inbox = org_a.client.get("/v1/identity/inbox").json()
    assert inbox["items"][0]["envelope"]["envelope"] == sealed and inbox["next_cursor"] is None
    # A user of another org is unknown to the agent: 404, nothing stored.
    other = make_org("o")
    sent = post(org_a.client, f"/v1/identity/users/{other.user.get_username()}/messages", {"envelope": envelope()}, **bearer(first["agent_token"]))
    assert sent.status_code == 404
    # And the other org's user cannot reach this org's agent.
    assert post(other.client, f"/v1/identity/agents/{first['agent_id']}/relations").status_code == 404
    assert post(other.client, f"/v1/identity/agents/{first['agent_id']}/messages", {"envelope": envelope()}).status_code == 404
    # Removing the relation closes the channel.
    assert org_a.client.delete(f"/v1/identity/agents/{first['agent_id']}/relations").status_code == 204
    assert org_a.client.delete(f"/v1/identity/agents/{first['agent_id']}/relations").status_code == 404
    sent = post(org_a.client, f"/v1/identity/users/{user}/messages", {"envelope": envelope()}, **bearer(first["agent_token"]))
    assert sent.status_code == 404
    with org_a.context():
        assert InboxItem.objects.count() == 1
    member = membership_set(org=org_a.org, username="someone-else", password="pw", is_admin=False)
    _, key = api_key_create(org=org_a.org, user=member.user)
    assert Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/v1/identity/inbox").json()["items"] == []


def test_inbox_is_cursor_paginated_newest_first(org_a):
    created = create_agent(org_a.client).json()
    post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/relations")
    user = org_a.user.get_username()
    sent = [post(org_a.client, f"/v1/identity/users/{user}/messages", {"envelope": envelope()}, **bearer(created["agent_token"])).json()["envelope_id"] for _ in range(5)]
    first = org_a.client.get("/v1/identity/inbox?limit=2").json()
    second = org_a.client.get(f"/v1/identity/inbox?limit=2&cursor={first['next_cursor']}").json()
    third = org_a.client.get(f"/v1/identity/inbox?limit=2&cursor={second['next_cursor']}").json()
    seen = [i["envelope"]["envelope_id"] for page in (first, second, third) for i in page["items"]]
    assert seen == list(reversed(sent)) and third["next_cursor"] is None
    assert org_a.client.get("/v1/identity/inbox?cursor=abc").status_code == 400


def test_envelopes_past_retention_are_purged(org_a, settings):
    from datetime import timedelta

    from django.utils import timezone

    from identity.tasks import retention

    created = create_agent(org_a.client).json()
    _send(org_a, created["agent_id"])
    _send(org_a, created["agent_id"])
    with org_a.context():
        old = Envelope.objects.order_by("id").first()
        Envelope.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    retention()
    with org_a.context():
        assert list(Envelope.objects.values_list("pk", flat=True)) != [] and not Envelope.objects.filter(pk=old.pk).exists()
        assert Envelope.objects.count() == 1
    assert json.loads(json.dumps(settings.AGENTS_ENVELOPE_RETENTION_DAYS)) == 30
