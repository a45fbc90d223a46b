"""v1 envelopes at the platform's edge (docs/envelopes.md): the outer shape is checked, the content
never; user keys; an agent's keys for its users; a repeated message id; rotation normal and emergency."""

from __future__ import annotations

import json

import pytest

from agents_identity.envelope import b64u, unb64u
from identity.models import Envelope, InboxItem, UserKeySet
from tests.identity.conftest import AgentKeys, bearer, create_agent, pair, post, put_user_keys, seal
from tests.sdk.vectors import VECTORS

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


@pytest.fixture
def both(org_a):
    created = create_agent(org_a.client, custom_id="envelope_bot").json()
    assert post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/relations").status_code == 201
    return pair(org_a.client, org_a.user.get_username(), created)


def _count(org) -> int:
    with org.context():
        return Envelope.objects.count()


def test_user_keys_are_registered_validated_and_rotated_into_grace(org_a):
    first, second = AgentKeys(), AgentKeys()
    created = put_user_keys(org_a.client, first)
    assert created.status_code == 201, created.json()
    [current] = created.json()["keys"]
    assert current["public_key"] == first.body(webhook=False)["public_key"] and current["status"] == "current"
    assert len(current["kid"]) == 16 and current["expires_at"] is None
    assert put_user_keys(org_a.client, first).status_code == 200  # the same pair again: unchanged
    rotated = put_user_keys(org_a.client, second).json()["keys"]
    assert [k["status"] for k in rotated] == ["current", "grace"] and rotated[1]["expires_at"]
    assert org_a.client.get("/v1/identity/users/me/keys").json()["keys"] == rotated
    bad = org_a.client.put("/v1/identity/users/me/keys", json.dumps({"public_key": b64u(bytes(32)), "signing_public_key": "x"}),
                           content_type="application/json")
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_request"
    with org_a.context():
        assert UserKeySet.objects.count() == 2


def test_agent_keys_are_readable_by_related_users_and_user_keys_by_related_agents(org_a, make_org, both):
    keys = org_a.client.get(f"/v1/identity/agents/{both.agent_id}/keys")
    assert keys.status_code == 200
    [current] = keys.json()["keys"]
    assert current["public_key"] == both.agent_keys.body(webhook=False)["public_key"] and current["status"] == "current"
    user_keys = org_a.client.get(f"/v1/identity/agents/{both.agent_id}/users/{both.user_id}/keys", **bearer(both.agent["agent_token"]))
    assert user_keys.status_code == 200 and user_keys.json()["keys"][0]["signing_public_key"] == both.user_keys.body(webhook=False)["signing_public_key"]
    # A member of the org without a relation: 404, exactly like an unknown agent.
    from django.test import Client

    from tenancy.services import api_key_create, membership_set

    member = membership_set(org=org_a.org, username="no-relation", password="pw", is_admin=False)
    _, key = api_key_create(org=org_a.org, user=member.user)
    stranger = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert stranger.get(f"/v1/identity/agents/{both.agent_id}/keys").status_code == 404
    assert org_a.client.get(f"/v1/identity/agents/{both.agent_id}/users/no-relation/keys", **bearer(both.agent["agent_token"])).status_code == 404
    # Once the user ends the relation, the agent no longer reads their keys.
    assert org_a.client.delete(f"/v1/identity/agents/{both.agent_id}/relations").status_code == 204
    ended = org_a.client.get(f"/v1/identity/agents/{both.agent_id}/users/{both.user_id}/keys", **bearer(both.agent["agent_token"]))
    assert ended.status_code == 404 and ended.json()["code"] == "not_found"


def test_the_platform_never_decrypts_it_checks_the_outer_shape(org_a, both):
    sealed = both.to_agent("secret plans")
    accepted = both.send_to_agent(envelope=sealed)
    assert accepted.status_code == 202, accepted.json()
    assert accepted.json()["message_id"] == json.loads(unb64u(sealed.split(".")[1]))["mid"]
    with org_a.context():
        row = Envelope.objects.get(public_id=accepted.json()["envelope_id"])
        assert row.body == sealed and row.size_bytes == len(sealed) and row.sender == f"user:{both.user_id}"
    assert b"secret plans" not in sealed.encode()
    # The same (sender, message id) again: 409, nothing stored.
    again = both.send_to_agent(envelope=sealed)
    assert again.status_code == 409 and again.json()["code"] == "envelope_replayed" and again.json()["message_id"] == row.message_id
    assert _count(org_a) == 1


def test_an_envelope_to_a_key_that_is_not_the_recipients_is_400(org_a, both):
    stranger_key = AgentKeys()
    wrong_key = seal(sender=("user", both.user_id), recipient=("agent", both.agent_id), sender_keys=both.user_keys, recipient_keys=stranger_key)
    refused = both.send_to_agent(envelope=wrong_key)
    assert refused.status_code == 400 and refused.json()["code"] == "envelope_key_unknown" and refused.json()["party"] == "recipient"
    # Signed with a key the user never registered.
    unsigned = seal(sender=("user", both.user_id), recipient=("agent", both.agent_id), sender_keys=stranger_key, recipient_keys=both.agent_keys)
    refused = both.send_to_agent(envelope=unsigned)
    assert refused.status_code == 400 and refused.json()["party"] == "sender" and "PUT /v1/identity/users/me/keys" in refused.json()["error"]
    # Re-addressed: an envelope for another agent, or naming another sender.
    other = create_agent(org_a.client, custom_id="other_bot").json()
    elsewhere = seal(sender=("user", both.user_id), recipient=("agent", other["agent_id"]), sender_keys=both.user_keys, recipient_keys=both.agent_keys)
    refused = both.send_to_agent(envelope=elsewhere)
    assert refused.status_code == 400 and f"addressed to agent {other['agent_id']}" in refused.json()["error"]
    forged = seal(sender=("user", "somebody-else"), recipient=("agent", both.agent_id), sender_keys=both.user_keys, recipient_keys=both.agent_keys)
    refused = both.send_to_agent(envelope=forged)
    assert refused.status_code == 400 and "as its sender" in refused.json()["error"]
    # And an agent to a user: sealed to a key the user does not have.
    to_user = seal(sender=("agent", both.agent_id), recipient=("user", both.user_id), sender_keys=both.agent_keys, recipient_keys=stranger_key)
    refused = both.send_to_user(envelope=to_user)
    assert refused.status_code == 400 and refused.json()["code"] == "envelope_key_unknown"
    assert _count(org_a) == 0


@pytest.mark.parametrize("case", [c for c in VECTORS["refuse"] if c["error"] in ("malformed", "unsupported_version")], ids=lambda c: c["name"])
def test_the_shape_vectors_are_refused_by_the_platform_too(org_a, both, case):
    refused = both.send_to_agent(envelope=case["envelope"])
    assert refused.status_code == 400 and "not a v1 envelope" in refused.json()["error"]


def test_a_normal_rotation_keeps_the_old_key_in_grace_an_emergency_one_does_not(org_a, both):
    old_keys = both.agent_keys
    regenerate = f"/v1/identity/agents/{both.agent_id}/token/regenerate"
    token = post(org_a.client, regenerate, {"emergency": False}).json()["agent_token"]
    new_keys = AgentKeys()
    assert post(org_a.client, f"/v1/identity/agents/{both.agent_id}/keys/register", new_keys.body(webhook=False), **bearer(token)).status_code == 200
    statuses = [k["status"] for k in org_a.client.get(f"/v1/identity/agents/{both.agent_id}/keys").json()["keys"]]
    assert statuses == ["current", "grace"]
    assert both.send_to_agent("to the old key, in grace").status_code == 202  # sealed to the old key: still accepted
    both.agent_keys = new_keys
    assert both.send_to_agent("to the new key").status_code == 202
    # Emergency: both sets revoked at once; the user is alerted in the inbox.
    post(org_a.client, regenerate, {"emergency": True})
    keys = org_a.client.get(f"/v1/identity/agents/{both.agent_id}/keys").json()["keys"]
    assert {k["status"] for k in keys} == {"revoked"} and all(k["revoked_at"] for k in keys)
    refused = both.send_to_agent("to a revoked key")
    assert refused.status_code == 400 and refused.json()["code"] == "envelope_key_unknown"
    assert "no registered keys" in refused.json()["error"]
    both.agent_keys = old_keys
    assert both.send_to_agent().status_code == 400
    with org_a.context():
        alert = InboxItem.objects.get(user_id=both.user_id, system_code="agent.keys_revoked")
    assert alert.system_type == "security_alert" and alert.data["agent_id"] == both.agent_id and alert.data["revoked_at"]
    assert _count(org_a) == 2


def test_a_key_whose_grace_period_ended_is_refused_400_on_both_sides(org_a, both):
    # Grace is a period, not a status forever: once it has passed, an envelope sealed to the old
    # key (recipient) or signed with the old key (sender) is refused like an unknown key.
    from datetime import timedelta

    from django.utils import timezone

    from identity.models import AgentKeySet

    old_agent, old_user = both.agent_keys, both.user_keys
    token = post(org_a.client, f"/v1/identity/agents/{both.agent_id}/token/regenerate", {"emergency": False}).json()["agent_token"]
    new_agent = AgentKeys()
    assert post(org_a.client, f"/v1/identity/agents/{both.agent_id}/keys/register", new_agent.body(webhook=False), **bearer(token)).status_code == 200
    new_user = AgentKeys()
    assert put_user_keys(org_a.client, new_user).status_code == 201
    assert both.send_to_agent("old keys, still in grace").status_code == 202
    with org_a.context():
        past = timezone.now() - timedelta(seconds=1)
        assert AgentKeySet.objects.filter(agent_id=both.agent_id, expires_at__isnull=False).update(expires_at=past) == 1
        assert UserKeySet.objects.filter(user_id=both.user_id, expires_at__isnull=False).update(expires_at=past) == 1
    assert [k["status"] for k in org_a.client.get(f"/v1/identity/agents/{both.agent_id}/keys").json()["keys"]] == ["current", "expired"]
    both.user_keys = new_user  # signed with the current user key, sealed to the agent's expired one
    refused = both.send_to_agent("to the expired key")
    assert refused.status_code == 400 and refused.json()["code"] == "envelope_key_unknown" and refused.json()["party"] == "recipient"
    assert refused.json()["key_id"] == json.loads(unb64u(both.to_agent().split(".")[1]))["rkid"]
    both.agent_keys, both.user_keys = new_agent, old_user  # sealed to the agent's current key, signed with the user's expired one
    refused = both.send_to_agent("signed with the expired key")
    assert refused.status_code == 400 and refused.json()["code"] == "envelope_key_unknown" and refused.json()["party"] == "sender"
    # And the agent's reply sealed to the user's expired key.
    both.agent_keys, both.user_keys = new_agent, old_user
    refused = both.send_to_user("to the user's expired key")
    assert refused.status_code == 400 and refused.json()["party"] == "recipient"
    both.user_keys = new_user
    assert both.send_to_agent("current keys").status_code == 202 and both.send_to_user("current keys").status_code == 201
    assert _count(org_a) == 3


def test_a_message_id_taken_between_the_check_and_the_write_is_409_not_500(org_a, both, monkeypatch):
    # Two requests with one (sender, message id) can both pass the check; the unique constraint
    # decides, and the loser is answered 409 like any repeat (never a 500, never two rows).
    from django.utils import timezone

    from identity import messaging

    sealed = both.to_agent("raced")
    real_check = messaging.check_envelope

    def check_then_lose_the_race(envelope, **kw):
        shape = real_check(envelope, **kw)
        Envelope.objects.create(public_id="env_" + "0" * 32, direction="to_agent", agent_id=both.agent_id, user_id=both.user_id,
                                sender=shape.sender, message_id=shape.message_id, body=envelope, size_bytes=shape.size_bytes, created_at=timezone.now())
        return shape

    monkeypatch.setattr(messaging, "check_envelope", check_then_lose_the_race)
    lost = both.send_to_agent(envelope=sealed)
    assert lost.status_code == 409 and lost.json()["code"] == "envelope_replayed", lost.content
    assert _count(org_a) == 1
