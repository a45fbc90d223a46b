"""The OpenAI-compatible endpoint in front of gateways as they behave (issues 31 and 29 item 7):
what the gateway receives, finish reasons and usage passed through, never invented
(in process: Django's client, the loopback upstream)."""

from __future__ import annotations

import pytest

from billing.services import credit_add
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

PATH = "/v1/agents/openai/v1/chat/completions"


@pytest.fixture
def writer(org_a, upstream):
    credit_add(org=org_a.org, cents=1000, actor="test")
    assert org_a.client.post("/v1/agents", {"name": "writer"}, content_type="application/json").status_code == 201
    return org_a


def call(org, **body):
    return org.client.post(PATH, {"model": "writer", "messages": [{"role": "user", "content": "hi"}], **body},
                           content_type="application/json")


def test_a_tool_result_turn_sent_with_null_content_reaches_a_strict_gateway_as_an_empty_string(writer, upstream):
    upstream.strict = True
    messages = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": "{\"a\": 2}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "4"},
    ]
    response = call(writer, messages=messages)

    assert response.status_code == 200, response.content
    sent = upstream.chat_requests[-1]["messages"]
    assert sent[1]["content"] == "" and sent[1]["tool_calls"][0]["id"] == "call_1"
