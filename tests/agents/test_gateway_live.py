"""The platform against a real llama-cpp-python server (`make test-gateways`; issue 31 item 5).

Skipped unless `AGENTS_LIVE_GATEWAY_URL` names a running server (scripts/test-gateways.sh builds
and starts one: gemma-3-270m Q4_K_M, a 2,048-token context). In process: Django's client, the
real server as the inference gateway. A 270M model's words are not asserted, only what the
platform makes of the server's answers.
"""

from __future__ import annotations

import os

import pytest

from agents import inference
from billing.services import credit_add
from tests.agents.conftest import make_agent, run

URL = os.environ.get("AGENTS_LIVE_GATEWAY_URL", "")
MODEL = os.environ.get("AGENTS_LIVE_GATEWAY_MODEL", "gemma-3-270m")
CTX = int(os.environ.get("AGENTS_LIVE_GATEWAY_CTX", "2048"))
PATH = "/v1/agents/openai/v1/chat/completions"

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.skipif(not URL, reason="make test-gateways runs these against a real llama-cpp-python server")]


@pytest.fixture
def gateway(settings):
    settings.INFERENCE_BASE_URL = URL
    settings.INFERENCE_API_KEY = ""
    settings.AGENTS_DEFAULT_MODEL = MODEL
    settings.AGENTS_RETRY_BASE_SECONDS = 0.01
    settings.AGENTS_RETRY_MAX_SECONDS = 0.05
    inference.reset_caches()
    yield settings
    inference.reset_caches()


@pytest.fixture
def org(org_a, gateway):
    credit_add(org=org_a.org, cents=100_000, actor="test")
    return org_a


def test_say_hi_is_an_ok_run_with_honest_usage(org):
    make_agent(org, "gem", model=MODEL, maxTokens=32)
    body = run(org, "gem", "Say hi").json()
    assert body["status"] == "ok", body
    assert body["finishReason"] in ("stop", "length")
    assert body["promptTokens"] is None or body["promptTokens"] > 0  # never an invented 0


def test_a_reply_cut_by_max_tokens_is_ok_with_finish_reason_length(org):
    make_agent(org, "terse", model=MODEL, maxTokens=3)
    body = run(org, "terse", "Count from one to fifty, in words.").json()
    assert (body["status"], body["finishReason"]) == ("ok", "length"), body


def test_the_agent_tool_loop_is_never_refused_by_the_servers_validation(org):
    make_agent(org, "calc", model=MODEL, tools=["calculator"], maxTokens=64)
    body = run(org, "calc", "Use the calculator tool to compute 6*7.").json()
    assert "validation" not in body.get("error", ""), body


def test_a_tool_result_turn_sent_with_null_content_is_accepted(org):
    make_agent(org, "gem2", model=MODEL, maxTokens=16)
    messages = [
        {"role": "user", "content": "What is 6*7? Use the tool."},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "calculator", "arguments": "{\"expression\": \"6*7\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"},
    ]
    response = org.client.post(PATH, {"model": "gem2", "messages": messages}, content_type="application/json")
    assert response.status_code == 200, response.content


def test_a_chat_round_answers(org):
    make_agent(org, "talker", model=MODEL, maxTokens=24)
    response = org.client.post("/v1/agents/chat", {"agent": "talker", "messages": [{"role": "user", "content": "Say hi"}]},
                               content_type="application/json")
    assert response.status_code == 200, response.content
    assert response.json()["runId"]


def test_a_conversation_over_the_context_is_named_then_trimmed(org):
    make_agent(org, "long", model=MODEL, maxTokens=16)
    filler = "the quick brown fox jumps over the lazy dog " * 30
    messages = []
    for n in range(12):  # far over 2,048 tokens
        messages += [{"role": "user", "content": f"note {n}: {filler}"}, {"role": "assistant", "content": "ok"}]
    messages.append({"role": "user", "content": "Say hi"})

    first = org.client.post(PATH, {"model": "long", "messages": messages}, content_type="application/json")
    if first.status_code != 200:  # the window was not known yet: the server's overflow, named
        assert first.status_code == 400 and first.json()["error"]["code"] == "context_length_exceeded", first.content
    again = org.client.post(PATH, {"model": "long", "messages": messages}, content_type="application/json")
    assert again.status_code == 200, again.content  # trimmed to the window the server named


def test_the_openai_stream_ends_with_a_finish_reason_and_no_invented_usage(org):
    import asyncio
    import json

    make_agent(org, "streamer", model=MODEL, maxTokens=16)
    response = org.client.post(PATH, {"model": "streamer", "messages": [{"role": "user", "content": "Say hi"}], "stream": True,
                                      "stream_options": {"include_usage": True}}, content_type="application/json")

    async def read() -> bytes:
        return b"".join([c if isinstance(c, bytes) else c.encode() async for c in response.streaming_content])

    lines = [line[6:] for line in asyncio.run(read()).decode().splitlines() if line.startswith("data: ")]
    chunks = [json.loads(line) for line in lines[:-1]]
    assert lines[-1] == "[DONE]" and "error" not in chunks[-1]
    finals = [c["choices"][0]["finish_reason"] for c in chunks if c.get("choices") and c["choices"][0]["finish_reason"]]
    assert finals and finals[-1] in ("stop", "length")
    for chunk in chunks:
        if "usage" in chunk:
            assert chunk["usage"]["prompt_tokens"] > 0
