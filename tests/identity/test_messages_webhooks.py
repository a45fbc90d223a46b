"""Relations, envelopes, inbox and signed webhook delivery with retries (spec 001)."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from agents_site.vocabulary import DeliveryStatus
from identity import delivery as delivery_module
from identity.models import Delivery, Envelope, InboxItem
from identity.tasks import deliveries_tick
from tests.identity.conftest import AgentKeys, bearer, create_agent, pair, post, random_bytes_b64, seal

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


@pytest.fixture
def webhook_agent(org_a, receiver, settings):
    """A webhook identity agent of org_a with real keys registered, pointed at the receiver; the user has keys too."""
    settings.AGENTS_WEBHOOK_RETRY_SCALE = 0  # every retry is due at once (no waiting in tests)
    created = create_agent(org_a.client, connection_mode="webhook", webhook_url=receiver.url).json()
    both = pair(org_a.client, org_a.user.get_username(), created, webhook=True)
    receiver.secret = both.agent_keys.webhook_secret
    return both


def test_users_envelope_is_delivered_by_a_signed_webhook(org_a, webhook_agent, receiver, sync_tasks):
    sealed = webhook_agent.to_agent("x" * 300)
    response = webhook_agent.send_to_agent(envelope=sealed)
    assert response.status_code == 202, response.json()
    assert len(receiver.received) == 1
    got = receiver.received[0]
    assert got.error is None, got.error  # verified by the standardwebhooks library
    assert got.verified["type"] == "envelope.created"
    assert got.verified["data"]["envelope"] == sealed
    assert got.verified["data"]["envelope_id"] == response.json()["envelope_id"]
    assert got.headers["webhook-id"] == response.json()["delivery_id"]
    assert set(got.verified) == {"type", "timestamp", "data"}
    log = org_a.client.get(f"/v1/identity/agents/{webhook_agent.agent_id}/deliveries").json()["deliveries"]
    assert log[0]["status"] == "succeeded" and log[0]["attempts"] == 1
    assert log[0]["attempt_log"][0]["status_code"] == 204


@pytest.mark.parametrize("mode", ["fail", "redirect", "slow"])
def test_failing_receiver_is_retried_then_dead_lettered_and_replayable(org_a, webhook_agent, receiver, sync_tasks, settings, mode):
    settings.AGENTS_WEBHOOK_MAX_ATTEMPTS = 3
    settings.AGENTS_WEBHOOK_TIMEOUT_SECONDS = 0.5
    receiver.slow_seconds = 1.5
    receiver.mode = mode
    response = webhook_agent.send_to_agent()
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
    log = org_a.client.get(f"/v1/identity/agents/{webhook_agent.agent_id}/deliveries?status=dead").json()["deliveries"]
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


def test_delivery_waits_for_a_secret_and_a_private_address_is_refused(org_a, settings, sync_tasks):
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    created = create_agent(org_a.client, connection_mode="webhook", webhook_url="http://127.0.0.1:9/hook").json()
    both = pair(org_a.client, org_a.user.get_username(), created, webhook=True)
    with org_a.context():  # a key set whose secret is gone (as after a cascade, or a database restored without it)
        from identity.models import AgentKeySet

        AgentKeySet.objects.filter(agent_id=created["agent_id"]).update(webhook_secret_encrypted="")
    response = both.send_to_agent()
    with org_a.context():
        row = Delivery.objects.get(public_id=response.json()["delivery_id"])
        assert row.status == DeliveryStatus.RETRYING and "no webhook secret" in row.last_error
    # The allow-list is withdrawn: the loopback address is refused at delivery time.
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = []
    post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/keys/register", both.agent_keys.body(webhook=True), **bearer(created["agent_token"]))
    with org_a.context():
        delivery_module.delivery_attempt(delivery_id=row.public_id, force=True)
        assert "refused destination" in Delivery.objects.get(pk=row.pk).last_error


def test_backoff_follows_the_engines_written_schedule_with_jitter(settings):
    settings.AGENTS_WEBHOOK_RETRY_SCALE = 1
    waits = [delivery_module.backoff_seconds(n) for n in range(1, 10)]
    for wait, planned in zip(waits, [5, 30, 120, 600, 1800, 3600, 3600, 3600, 3600], strict=True):
        assert planned * 0.9 <= wait <= planned * 1.1


def test_envelope_over_256_kib_is_413_and_not_stored(org_a, settings):
    settings.AGENTS_ENVELOPE_MAX_BYTES = 4096
    both = pair(org_a.client, org_a.user.get_username(), create_agent(org_a.client).json())
    fits, too_big = both.to_agent("a" * 2000), both.to_agent("a" * 3200)
    assert len(fits) <= 4096 < len(too_big)
    response = both.send_to_agent(envelope=too_big)
    assert response.status_code == 413 and response.json() == {"status": 413, "code": "payload_too_large",
                                                                 "error": "the envelope exceeds 4096 bytes", "limit": 4096}
    assert both.send_to_agent(envelope=fits).status_code == 202
    for bad in ("%%%", random_bytes_b64(), fits.replace("v1.", "v2.", 1)):
        refused = both.send_to_agent(envelope=bad)
        assert refused.status_code == 400 and "not a v1 envelope" in refused.json()["error"], refused.json()
    with org_a.context():
        assert Envelope.objects.count() == 1


def test_relations_user_context_and_agent_to_user_messages(org_a, make_org):
    from tenancy.services import api_key_create, membership_set

    first = create_agent(org_a.client, custom_id="first_agent").json()
    second = create_agent(org_a.client, custom_id="second_agent").json()
    user = org_a.user.get_username()
    both = pair(org_a.client, user, first)
    # No relation yet: the agent cannot see the user's context or keys, nor write to them.
    context = f"/v1/identity/agents/{first['agent_id']}/user-context/{user}/agents"
    assert org_a.client.get(context, **bearer(first["agent_token"])).status_code == 404
    assert org_a.client.get(f"/v1/identity/agents/{first['agent_id']}/users/{user}/keys", **bearer(first["agent_token"])).status_code == 404
    assert both.send_to_user().status_code == 404
    added = post(org_a.client, f"/v1/identity/agents/{first['agent_id']}/relations")
    assert added.status_code == 201 and added.json()["status"] == "active"
    assert post(org_a.client, f"/v1/identity/agents/{first['agent_id']}/relations").status_code == 200  # idempotent
    post(org_a.client, f"/v1/identity/agents/{second['agent_id']}/relations")
    answer = org_a.client.get(context, **bearer(first["agent_token"]))
    assert answer.status_code == 200
    assert sorted(a["custom_id"] for a in answer.json()["agents"]) == ["first_agent", "second_agent"]
    # Another agent's token on this agent's route: 403.
    assert org_a.client.get(context, **bearer(second["agent_token"])).status_code == 403
    sealed = both.to_user("a reply")
    sent = both.send_to_user(envelope=sealed)
    assert sent.status_code == 201, sent.json()
    inbox = org_a.client.get("/v1/identity/inbox").json()
    assert inbox["items"][0]["envelope"]["envelope"] == sealed and inbox["next_cursor"] is None
    # A user of another org is unknown to the agent: 404, nothing stored.
    other = make_org("o")
    stranger = seal(sender=("agent", first["agent_id"]), recipient=("user", other.user.get_username()), sender_keys=both.agent_keys,
                    recipient_keys=AgentKeys())
    sent = post(org_a.client, f"/v1/identity/users/{other.user.get_username()}/messages", {"envelope": stranger}, **bearer(first["agent_token"]))
    assert sent.status_code == 404
    # And the other org's user cannot reach this org's agent, nor read its keys.
    assert post(other.client, f"/v1/identity/agents/{first['agent_id']}/relations").status_code == 404
    assert post(other.client, f"/v1/identity/agents/{first['agent_id']}/messages", {"envelope": both.to_agent()}).status_code == 404
    assert other.client.get(f"/v1/identity/agents/{first['agent_id']}/keys").status_code == 404
    # Removing the relation closes the channel.
    assert org_a.client.delete(f"/v1/identity/agents/{first['agent_id']}/relations").status_code == 204
    assert org_a.client.delete(f"/v1/identity/agents/{first['agent_id']}/relations").status_code == 404
    assert both.send_to_user().status_code == 404
    with org_a.context():
        assert InboxItem.objects.count() == 1
    member = membership_set(org=org_a.org, username="someone-else", password="pw", is_admin=False)
    _, key = api_key_create(org=org_a.org, user=member.user)
    assert Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/v1/identity/inbox").json()["items"] == []


def test_inbox_is_cursor_paginated_newest_first(org_a):
    created = create_agent(org_a.client).json()
    post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/relations")
    both = pair(org_a.client, org_a.user.get_username(), created)
    sent = [both.send_to_user().json()["envelope_id"] for _ in range(5)]
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

    both = pair(org_a.client, org_a.user.get_username(), create_agent(org_a.client).json())
    both.send_to_agent()
    both.send_to_agent()
    with org_a.context():
        old = Envelope.objects.order_by("id").first()
        Envelope.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    retention()
    with org_a.context():
        assert list(Envelope.objects.values_list("pk", flat=True)) != [] and not Envelope.objects.filter(pk=old.pk).exists()
        assert Envelope.objects.count() == 1
    assert json.loads(json.dumps(settings.AGENTS_ENVELOPE_RETENTION_DAYS)) == 30
