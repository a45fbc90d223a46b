"""The OpenAI-compatible endpoint in front of gateways as they behave (issues 31 and 29 item 7):
what the gateway receives, finish reasons and usage passed through, never invented
(in process: Django's client, the loopback upstream)."""

from __future__ import annotations

import asyncio
import json

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


def test_length_passes_through_and_usage_is_left_out_when_the_gateway_sent_none(writer, upstream):
    upstream.script(Reply(content="cut mid-wo", finish="length", usage=False))

    body = call(writer, max_tokens=4).json()

    assert body["choices"][0]["finish_reason"] == "length" and body["choices"][0]["message"]["content"] == "cut mid-wo"
    assert "usage" not in body


def test_usage_is_passed_when_the_gateway_sent_it(writer, upstream):
    upstream.script(Reply(content="whole", prompt_tokens=12, completion_tokens=3))
    body = call(writer).json()
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}


def _chunks(response) -> list:
    """Read a streamed answer; return its `data:` JSON chunks (`[DONE]` last, asserted)."""
    async def read() -> bytes:
        return b"".join([chunk if isinstance(chunk, bytes) else chunk.encode() async for chunk in response.streaming_content])

    lines = [line[6:] for line in asyncio.run(read()).decode().splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_a_stream_ends_with_length_and_no_usage_chunk_when_the_gateway_sent_no_usage(writer, upstream):
    upstream.script(Reply(content="cut mid-wo", finish="length", usage=False))

    response = call(writer, stream=True, stream_options={"include_usage": True})

    chunks = _chunks(response)
    assert response.status_code == 200 and response["X-Agents-Run-Id"].startswith("run")
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in chunk for chunk in chunks)
