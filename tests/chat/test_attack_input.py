"""Hostile bodies on POST /v1/agents/chat found by the attack review: each a 4xx before the round's
run starts — nothing stored, nothing sent to the gateway, nothing billed, never a recorded failure."""

from __future__ import annotations

import pytest

from tests.chat.conftest import charged, chat, stored, user
from tests.support.files import file_bytes

pytestmark = pytest.mark.django_db


def nested(depth: int) -> str:
    """Return a JSON object `depth` levels deep: `{"a":{"a":…1…}}`."""
    return '{"a":' * depth + "1" + "}" * depth


def post(org, raw: str):
    return org.client.generic("POST", "/v1/agents/chat", raw, content_type="application/json")


def _nothing_happened(org, upstream) -> None:
    assert stored(org) == {"conversations": [], "messages": [], "runs": []}
    assert upstream.chat_requests == [] and charged(org) == []


def test_tool_parameters_nested_too_deep_are_a_400_before_the_round_starts(funded, upstream):
    raw = '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":' + nested(300) + "}}]}"  # 300: past MAX_BODY_DEPTH, far inside the JSON parser's recursion headroom

    response = post(funded, raw)

    assert response.status_code == 400, response.content
    # Past MAX_BODY_DEPTH the body model refuses it unread (its nested function object names the
    # field); between 64 and 100 levels the round's own schema check names tools[i].function.parameters.
    error = response.json()["error"]
    assert response.json()["code"] == "invalid_request" and "parameters" in error and "nests deeper than" in error
    _nothing_happened(funded, upstream)


def test_tool_parameters_a_little_too_deep_name_the_tool(funded, upstream):
    raw = '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":' + nested(80) + "}}]}"

    response = post(funded, raw)

    assert response.status_code == 400, response.content
    assert "tools[0].function.parameters nests deeper than 64 levels" in response.json()["error"]
    _nothing_happened(funded, upstream)


def test_tool_parameters_of_an_ordinary_depth_are_offered(funded, upstream):
    raw = '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":' + nested(20) + "}}]}"

    assert post(funded, raw).status_code == 200
    assert upstream.chat_requests[0]["tools"][-1]["function"]["name"] == "f"


GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # a GitHub token shape the scanner knows


def store_bytes(org) -> bytes:
    """Return every byte of the org's store files (table, WAL, journal) and the default database's."""
    from pathlib import Path

    from django.db import connections

    from tenancy import stores

    files = [p for p in stores.store_path(org.slug).parent.iterdir() if p.is_file() and p.name.startswith(org.slug)]
    default_db = Path(connections["default"].settings_dict["NAME"])
    files += list(default_db.parent.glob(default_db.name + "*"))
    return b"".join(file_bytes(p) for p in files)


@pytest.mark.parametrize("where", ["description", "parameters"])
def test_a_credential_in_a_tool_definition_is_refused_and_never_sent(funded, upstream, where):
    function = {"name": "deploy", "description": f"deploy with {GITHUB}"} if where == "description" else {
        "name": "deploy", "parameters": {"type": "object", "properties": {"token": {"type": "string", "default": GITHUB}}}}

    response = funded.client.post("/v1/agents/chat", {"messages": [{"role": "user", "content": "hi"}],
                                                      "tools": [{"type": "function", "function": function}]},
                                  content_type="application/json")

    assert response.status_code == 422, response.content
    assert response.json()["code"] == "secret_in_transcript" and GITHUB not in response.content.decode()
    _nothing_happened(funded, upstream)
    assert GITHUB.encode() not in store_bytes(funded)


def test_more_tools_than_the_cap_is_a_400_and_nothing_starts(funded, upstream):
    tools = [{"type": "function", "function": {"name": f"f{i}"}} for i in range(129)]

    response = chat(funded, {"messages": user("hi"), "tools": tools})

    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": "tools: at most 128 function definitions"}
    assert upstream.chat_requests == []


def test_more_messages_than_the_cap_is_a_400_before_any_scan(funded, upstream, monkeypatch):
    from chat import validation

    scanned = []
    monkeypatch.setattr(validation, "refuse_secrets", lambda text: scanned.append(text))
    response = chat(funded, {"messages": [{"role": "user", "content": "hi"}] * (validation.MAX_MESSAGES + 1)})
    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": f"messages: at most {validation.MAX_MESSAGES} messages in one request"}
    assert scanned == [] and upstream.chat_requests == []


def test_more_content_than_the_total_cap_is_a_400(funded, upstream):
    from chat import validation

    piece = "x" * (100 * 1024)
    response = chat(funded, {"messages": [{"role": "user", "content": piece}] * 6})
    assert response.status_code == 400
    assert response.json()["error"] == f"messages: at most {validation.MAX_TOTAL_CONTENT_BYTES // 1024} KiB of content in one request"
    assert upstream.chat_requests == []
