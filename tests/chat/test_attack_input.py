"""Hostile bodies on POST /v1/agents/chat found by the attack review: each a 4xx before the round's
run starts — nothing stored, nothing sent to the gateway, nothing billed, never a recorded failure."""

from __future__ import annotations

import pytest

from tests.chat.conftest import charged, stored

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
    raw = '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":' + nested(900) + "}}]}"

    response = post(funded, raw)

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request" and "tools[0].function.parameters" in response.json()["error"]
    _nothing_happened(funded, upstream)


def test_tool_parameters_of_an_ordinary_depth_are_offered(funded, upstream):
    raw = '{"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":' + nested(20) + "}}]}"

    assert post(funded, raw).status_code == 200
    assert upstream.chat_requests[0]["tools"][-1]["function"]["name"] == "f"
