"""The identity WebSocket closes when its org is deleted (tenancy.revocation, issue 25 item 3)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from server.asgi import application
from tenancy.services import org_delete
from tests.identity.conftest import create_agent


def _connect(token: str) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, "/v1/identity/ws", headers=[(b"authorization", f"Bearer {token}".encode())])


@pytest.mark.django_db(transaction=True)
async def test_deleting_the_org_closes_its_agents_websockets_and_not_another_orgs(org_a, org_b):
    doomed = _connect((await sync_to_async(create_agent)(org_a.client)).json()["agent_token"])
    kept = _connect((await sync_to_async(create_agent)(org_b.client)).json()["agent_token"])
    assert (await doomed.connect())[0] and (await kept.connect())[0]
    await sync_to_async(org_delete)(org=org_a.org)
    assert await doomed.receive_output(timeout=5) == {"type": "websocket.close", "code": 4403}
    await kept.send_json_to({"type": "ack", "envelope_ids": []})
    assert (await kept.receive_json_from(timeout=5))["type"] == "acked"  # another org's socket lives on
    await kept.disconnect()
