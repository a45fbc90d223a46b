"""The identity WebSocket (live + queued delivery, revocation) and the cascade delete (spec 001)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from agents.models import Agent
from server.asgi import application
from agents_site.vocabulary import RelationStatus
from identity.models import AgentCredential, AgentKeySet, Envelope, InboxItem, Relation
from tests.identity.conftest import AgentKeys, bearer, create_agent, pair, post


def _connect(token: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, "/v1/identity/ws", headers=[(b"authorization", f"Bearer {token}".encode())])


@pytest.mark.django_db(transaction=True)
async def test_websocket_receives_live_and_queued_envelopes_in_order(org_a):
    created = (await sync_to_async(create_agent)(org_a.client)).json()
    agent_id, token = created["agent_id"], created["agent_token"]
    both = await sync_to_async(pair)(org_a.client, org_a.user.get_username(), created)
    send = sync_to_async(lambda: both.send_to_agent().json()["envelope_id"])

    # Two envelopes arrive while the agent is offline: they wait.
    queued = [await send(), await send()]
    ws = _connect(token)
    connected, _ = await ws.connect()
    assert connected
    got = [await ws.receive_json_from(timeout=5), await ws.receive_json_from(timeout=5)]
    assert [g["envelope_id"] for g in got] == queued
    # A live one arrives while connected.
    live = await send()
    frame = await ws.receive_json_from(timeout=5)
    assert frame["type"] == "envelope" and frame["envelope_id"] == live
    # Acknowledge only the first two, reconnect: the unacknowledged one comes again.
    await ws.send_json_to({"type": "ack", "envelope_ids": queued})
    assert (await ws.receive_json_from(timeout=5)) == {"type": "acked", "count": 2}
    await ws.disconnect()
    later = await send()
    ws = _connect(token)
    assert (await ws.connect())[0]
    again = [await ws.receive_json_from(timeout=5), await ws.receive_json_from(timeout=5)]
    assert [g["envelope_id"] for g in again] == [live, later]
    # The agent writes to a user over the socket: only with a relation.
    user = org_a.user.get_username()
    await ws.send_json_to({"type": "message", "user_id": user, "envelope": both.to_user()})
    refused = await ws.receive_json_from(timeout=5)
    assert refused["type"] == "error" and refused["status"] == 404
    await sync_to_async(post)(org_a.client, f"/v1/identity/agents/{agent_id}/relations")
    await ws.send_json_to({"type": "message", "user_id": user, "envelope": both.to_user()})
    sent = await ws.receive_json_from(timeout=5)
    assert sent["type"] == "sent"
    inbox = await sync_to_async(lambda: org_a.client.get("/v1/identity/inbox").json())()
    assert inbox["items"][0]["envelope"]["envelope_id"] == sent["envelope_id"]
    await ws.disconnect()


@pytest.mark.django_db(transaction=True)
async def test_websocket_refuses_bad_tokens_and_emergency_rotation_closes_it(org_a):
    bad = _connect("agt_nope")
    connected, code = await bad.connect()
    assert not connected and code == 4401
    created = (await sync_to_async(create_agent)(org_a.client)).json()
    agent_id, old = created["agent_id"], created["agent_token"]
    ws = _connect(old)
    assert (await ws.connect())[0]
    # A normal rotation keeps the connection (grace); an emergency one closes it at once.
    await sync_to_async(post)(org_a.client, f"/v1/identity/agents/{agent_id}/token/regenerate", {"emergency": False})
    alert = await ws.receive_json_from(timeout=5)  # the agent is told, live
    assert alert["type"] == "security_alert" and alert["code"] == "agent.token_rotated" and alert["data"]["previous_valid_until"]
    await ws.send_json_to({"type": "ack", "envelope_ids": []})
    assert (await ws.receive_json_from(timeout=5))["type"] == "acked"
    await sync_to_async(post)(org_a.client, f"/v1/identity/agents/{agent_id}/token/regenerate", {"emergency": True})
    assert await ws.receive_json_from(timeout=5) == {"type": "security_alert", "code": "agent.token_revoked", "data": {"agent_id": agent_id}}
    closed = await ws.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": 4403}
    again = _connect(old)
    assert (await again.connect()) == (False, 4401)


def _setup_relations(org_a, make_org):
    from django.test import Client

    from tenancy.services import api_key_create, membership_set

    created = create_agent(org_a.client, custom_id="doomed_agent", display_name="Doomed").json()
    agent_keys = AgentKeys()
    users = []
    for name in ("alice-x", "bob-x"):
        member = membership_set(org=org_a.org, username=name, password="pw", is_admin=False)
        _, key = api_key_create(org=org_a.org, user=member.user)
        client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
        assert post(client, f"/v1/identity/agents/{created['agent_id']}/relations").status_code == 201
        assert pair(client, name, created, agent_keys=agent_keys).send_to_agent().status_code == 202
        users.append(client)
    return created, users


def _assert_cascaded(org_a, created, users):
    agent_id = created["agent_id"]
    with org_a.context():
        assert not Agent.objects.filter(pk=agent_id).exists()
        assert set(Relation.objects.filter(agent_id=agent_id).values_list("status", flat=True)) == {RelationStatus.TERMINATED_BY_DELETION}
        assert AgentCredential.objects.filter(agent_id=agent_id, revoked_at__isnull=True).count() == 0
        assert AgentKeySet.objects.filter(agent_id=agent_id, revoked_at__isnull=True).count() == 0
        assert Envelope.objects.filter(agent_id=agent_id).count() == 2  # kept
        assert InboxItem.objects.filter(system_code="agent.deleted_by_creator").count() == 2
    for client in users:
        items = client.get("/v1/identity/inbox").json()["items"]
        assert items[0]["kind"] == "system"
        assert items[0]["system"]["type"] == "security_alert" and items[0]["system"]["code"] == "agent.deleted_by_creator"
        assert items[0]["system"]["data"]["display_name"] == "Doomed"
    refused = post(org_a.client, f"/v1/identity/agents/{agent_id}/keys/register", AgentKeys().body(webhook=False), **bearer(created["agent_token"]))
    assert refused.status_code == 403


@pytest.mark.django_db
def test_delete_previews_then_cascades_and_alerts_every_affected_user(org_a, make_org):
    created, users = _setup_relations(org_a, make_org)
    preview = org_a.client.get(f"/v1/identity/agents/{created['agent_id']}/deletion-preview")
    assert preview.json() == {"affected_h2a_count": 2, "affected_users_count": 2}
    assert org_a.client.delete(f"/v1/identity/agents/{created['agent_id']}").status_code == 204
    _assert_cascaded(org_a, created, users)
    assert org_a.client.get(f"/v1/identity/agents/{created['agent_id']}").status_code == 404


@pytest.mark.django_db
def test_delete_through_v1_agents_takes_the_same_cascade(org_a, make_org):
    created, users = _setup_relations(org_a, make_org)
    assert org_a.client.delete(f"/v1/agents/{created['agent_id']}").status_code == 204
    _assert_cascaded(org_a, created, users)


@pytest.mark.django_db
def test_deleting_a_platform_agent_touches_no_identity_rows(org_a):
    created = org_a.client.post("/v1/agents", json.dumps({"name": "plain"}), content_type="application/json")
    assert created.status_code == 201
    assert org_a.client.delete("/v1/agents/plain").status_code == 204
    with org_a.context():
        assert not InboxItem.objects.exists()
