"""GET /v1/identity/inbox/stream under a real daphne: replay from Last-Event-ID, then live."""

from __future__ import annotations

import httpx
import pytest

from tests.identity.conftest import AgentKeys, seal
from tests.sessions.sse import SSEStream


@pytest.fixture
def daphne_server(transactional_db):
    from tests.support.live import LiveServer

    server = LiveServer({"AGENTS_SSE_PING_SECONDS": "0.5", "AGENTS_SSE_CATCHUP_SECONDS": "0.3"}).start(timeout=120)  # a loaded CI box starts slowly
    yield server
    server.stop()


def _open(base: str, key: str, headers: dict | None = None) -> SSEStream:
    client = httpx.Client(timeout=httpx.Timeout(10.0))
    request = client.build_request("GET", f"{base}/v1/identity/inbox/stream", headers={"Authorization": f"Bearer {key}", **(headers or {})})
    return SSEStream(response=client.send(request, stream=True), client=client)


def test_inbox_stream_replays_after_last_event_id_then_streams_live(org_a, daphne_server):
    base, auth = daphne_server.url, {"Authorization": f"Bearer {org_a.key}"}
    created = httpx.post(f"{base}/v1/identity/agents", json={"display_name": "Streamer", "connection_mode": "websocket"}, headers=auth, timeout=30).json()
    assert "agent_token" in created, created
    agent_auth = {"Authorization": f"Bearer {created['agent_token']}"}
    assert httpx.post(f"{base}/v1/identity/agents/{created['agent_id']}/relations", headers=auth, timeout=30).status_code == 201
    user = org_a.user.get_username()
    agent_keys, user_keys = AgentKeys(), AgentKeys()
    assert httpx.post(f"{base}/v1/identity/agents/{created['agent_id']}/keys/register", json=agent_keys.body(webhook=False), headers=agent_auth, timeout=30).status_code == 200
    assert httpx.put(f"{base}/v1/identity/users/me/keys", json=user_keys.body(webhook=False), headers=auth, timeout=30).status_code == 201

    def envelope() -> str:
        return seal(sender=("agent", created["agent_id"]), recipient=("user", user), sender_keys=agent_keys, recipient_keys=user_keys)

    sent = [httpx.post(f"{base}/v1/identity/users/{user}/messages", json={"envelope": envelope()}, headers=agent_auth, timeout=30).json()["envelope_id"] for _ in range(3)]
    items = httpx.get(f"{base}/v1/identity/inbox", headers=auth, timeout=30).json()["items"]
    first_id = items[-1]["id"]  # the oldest item

    stream = _open(base, org_a.key, {"Last-Event-ID": first_id})
    try:
        assert stream.response.status_code == 200
        assert stream.response.headers["content-type"].startswith("text/event-stream")
        replayed = stream.collect(events=2, timeout=10)
        assert [f.data["envelope"]["envelope_id"] for f in replayed] == sent[1:]
        assert all(f.event == "inbox" for f in replayed)
        live = httpx.post(f"{base}/v1/identity/users/{user}/messages", json={"envelope": envelope()}, headers=agent_auth, timeout=30).json()["envelope_id"]
        more = stream.collect(events=1, timeout=10)
        assert [f.data["envelope"]["envelope_id"] for f in more] == [live]
        assert more[0].id > replayed[-1].id
    finally:
        stream.close()
    refused = httpx.get(f"{base}/v1/identity/inbox/stream", headers={"Last-Event-ID": "x"} | auth, timeout=30)
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_request"
    assert httpx.get(f"{base}/v1/identity/inbox/stream", timeout=30).status_code == 403
