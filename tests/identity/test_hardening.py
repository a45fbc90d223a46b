"""The identity API refuses what it cannot read with a 400 in the error shape (issue 29, item 3)."""

from __future__ import annotations

import json

import pytest

from identity.models import IdentityProfile

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def _post(client, path, raw: bytes, content_type="application/json"):
    return client.generic("POST", path, raw, content_type=content_type)


def test_deeply_nested_json_is_400(org_a):
    raw = b'{"display_name": ' + b"[" * 1000 + b"]" * 1000 + b', "connection_mode": "websocket"}'
    response = _post(org_a.client, "/v1/identity/agents", raw)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid_request" and body["status"] == 400
    with org_a.context():
        assert IdentityProfile.objects.count() == 0


def test_lone_surrogate_in_a_choice_field_is_400_without_echo(org_a):
    raw = b'{"display_name": "Bot", "connection_mode": "web\\ud800socket"}'
    response = _post(org_a.client, "/v1/identity/agents", raw)
    assert response.status_code == 400, response.content
    assert "\ud800" not in response.content.decode("utf-8", "surrogatepass")
    assert b"\\ud800" not in response.content


def test_bad_choice_is_not_echoed(org_a):
    response = org_a.client.post("/v1/identity/agents", {"display_name": "Bot", "connection_mode": "<script>x</script>"}, content_type="application/json")
    assert response.status_code == 400
    assert b"script" not in response.content


def test_undecodable_body_is_400(org_a):
    response = _post(org_a.client, "/v1/identity/agents", b'{"display_name": "\xff\xfe", "connection_mode": "websocket"}')
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"


def _connect(token: str):
    from channels.testing import WebsocketCommunicator

    from server.asgi import application

    return WebsocketCommunicator(application, "/v1/identity/ws", headers=[(b"authorization", f"Bearer {token}".encode())])


@pytest.mark.django_db(transaction=True)
async def test_websocket_answers_bad_frames_with_error_frames_and_stays_open(org_a):
    from asgiref.sync import sync_to_async

    from tests.identity.conftest import create_agent

    created = (await sync_to_async(create_agent)(org_a.client)).json()
    ws = _connect(created["agent_token"])
    assert (await ws.connect())[0]
    bad_frames = [
        ("text", "not json"),
        ("bytes", b"\x00\x01binary"),
        ("text", "[" * 5000 + "]" * 5000),
        ("text", '{"type": "ack", "envelope_ids": ["\\ud800"]}'),
        ("text", '{"type": "ack", "envelope_ids": ["../../etc"]}'),
        ("text", '{"type": "ack", "envelope_ids": "env_x"}'),
        ("text", '{"type": "message", "user_id": "\\udfff", "envelope": "v1.a.b.c"}'),
        ("text", '{"type": "message", "user_id": {"a": 1}, "envelope": "v1.a.b.c"}'),
        ("text", '"a string"'),
        ("text", '{"type": "<script>"}'),
    ]
    for kind, frame in bad_frames:
        if kind == "text":
            await ws.send_to(text_data=frame)
        else:
            await ws.send_to(bytes_data=frame)
        answer = await ws.receive_json_from(timeout=5)
        assert answer["type"] == "error" and answer["status"] == 400 and answer["code"] == "invalid_request", (frame, answer)
        assert "script" not in answer["error"] and "\\ud" not in json.dumps(answer)
    # Still connected and working.
    await ws.send_json_to({"type": "ack", "envelope_ids": []})
    assert await ws.receive_json_from(timeout=5) == {"type": "acked", "count": 0}
    await ws.disconnect()
