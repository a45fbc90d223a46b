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


# -- the caller's parameters (issue 29 item 7) ---------------------------------------------------

PASSED = {
    "response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}},
    "stop": ["\n\n", "END"],
    "seed": 42,
    "presence_penalty": 0.5,
    "frequency_penalty": -0.25,
    "user": "end-user-17",
}


def test_the_callers_parameters_reach_the_gateway_unchanged(writer, upstream):
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    choice = {"type": "function", "function": {"name": "lookup"}}

    response = call(writer, tools=tools, tool_choice=choice, parallel_tool_calls=False, **PASSED)

    assert response.status_code == 200, response.content
    sent = upstream.chat_requests[-1]
    assert {name: sent.get(name) for name in PASSED} == PASSED
    assert (sent["tool_choice"], sent["parallel_tool_calls"]) == (choice, False)
    assert "stream" not in sent and "stream_options" not in sent  # not streamed: asked not streamed (issue 53)


def test_stream_options_are_the_endpoints_own_not_forwarded(writer, upstream):
    upstream.script(Reply(content="hi", prompt_tokens=5, completion_tokens=1))
    response = call(writer, stream=True, stream_options={"include_usage": False})
    chunks = _chunks(response)
    assert all("usage" not in chunk for chunk in chunks)  # include_usage false honoured
    assert upstream.chat_requests[-1]["stream_options"] == {"include_usage": True}

    upstream.script(Reply(content="hi", prompt_tokens=5, completion_tokens=1))
    chunks = _chunks(call(writer, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}


@pytest.mark.parametrize("field,value,param", [
    ("logprobs", True, "logprobs"),
    ("top_logprobs", 3, "top_logprobs"),
    ("logit_bias", {"50256": -100}, "logit_bias"),
    ("metadata", {"a": 1}, "metadata.a"),  # accepted (issue 53): its values are strings
    ("frobnicate", 1, "frobnicate"),
    ("stop", ["a", "b", "c", "d", "e"], "stop"),
    ("tool_choice", "sometimes", "tool_choice"),
    ("response_format", {"type": "yaml"}, "response_format"),
    ("seed", "42", "seed"),
    ("presence_penalty", 3, "presence_penalty"),
    ("user", 17, "user"),
    ("parallel_tool_calls", "yes", "parallel_tool_calls"),
])
def test_a_parameter_not_handled_or_malformed_is_refused_400_naming_it(writer, upstream, field, value, param):
    response = call(writer, **{field: value})

    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", param) and field in error["message"].lower()
    assert upstream.chat_requests == []  # nothing reached the gateway, no run recorded
    from runs.models import Run

    with writer.context():
        assert not Run.objects.exists()


def test_logprobs_false_asks_for_nothing_and_is_accepted(writer, upstream):
    assert call(writer, logprobs=False).status_code == 200
    assert "logprobs" not in upstream.chat_requests[-1]


# -- the run id to the gateway (issue 32 item 5) -------------------------------------------------


def test_every_completion_carries_the_run_id_header_and_the_body_stays_strict(writer, upstream):
    upstream.strict = True  # an unknown body field would be refused: none is sent by default
    response = call(writer, user="end-user-17")

    assert response.status_code == 200, response.content
    run_id = response.json()["id"]
    assert upstream.request_headers[-1]["x-agents-run-id"] == run_id
    sent = upstream.chat_requests[-1]
    assert "metadata" not in sent and sent["user"] == "end-user-17"


def test_the_run_id_in_the_body_only_behind_its_setting(writer, upstream, settings):
    settings.AGENTS_GATEWAY_RUN_METADATA = True
    response = call(writer)
    run_id = response.json()["id"]
    sent = upstream.chat_requests[-1]
    assert sent["metadata"] == {"agents_run_id": run_id, "tags": [f"agents_run:{run_id}"]}
    assert upstream.request_headers[-1]["x-agents-run-id"] == run_id
    assert "user" not in sent  # the platform never invents a `user`


# -- context-aware prompts (issue 31 item 2) ---------------------------------------------------


def _history(turns: int, words: int = 20) -> list[dict]:
    messages = []
    for n in range(turns):
        messages.append({"role": "user", "content": f"question {n} " + "word " * words})
        messages.append({"role": "assistant", "content": f"answer {n} " + "word " * words})
    messages.append({"role": "user", "content": "the last question"})
    return messages


def test_the_oldest_turns_are_dropped_to_fit_the_agents_context_window(org_a, upstream):
    credit_add(org=org_a.org, cents=1000, actor="test")
    made = org_a.client.post("/v1/agents", {"name": "small", "instructions": "Be brief.", "contextWindow": 400, "maxTokens": 100},
                             content_type="application/json")
    assert made.status_code == 201 and made.json()["contextWindow"] == 400

    response = org_a.client.post(PATH, {"model": "small", "messages": _history(10)}, content_type="application/json")

    assert response.status_code == 200, response.content
    sent = upstream.chat_requests[-1]["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."} and sent[-1]["content"] == "the last question"
    assert 3 < len(sent) < 22 and sent[1]["content"].startswith(("question", "answer"))
    kept = [int(m["content"].split()[1]) for m in sent[1:-1]]
    assert kept == sorted(kept) and max(kept) == 9  # the newest turns stayed, the oldest went
    # chars ÷ 3 (no tokenize route): the history sent is within the budget 400 − 100 − 16
    assert sum(-(-len(m["content"]) // 3) + 4 for m in sent) <= 284


def test_the_gateways_tokenizer_counts_when_it_has_one(org_a, upstream):
    upstream.tokenizer = "llama.cpp"  # POST /tokenize; the fake counts words
    credit_add(org=org_a.org, cents=1000, actor="test")
    org_a.client.post("/v1/agents", {"name": "counted", "contextWindow": 400, "maxTokens": 100}, content_type="application/json")

    response = org_a.client.post(PATH, {"model": "counted", "messages": _history(10)}, content_type="application/json")

    assert response.status_code == 200
    assert any(r["_path"] == "/tokenize" for r in upstream.requests)
    sent = upstream.chat_requests[-1]["messages"]
    words = sum(len(m["content"].split()) + 4 for m in sent)
    assert words <= 284 and words + 26 > 284  # counted by the tokenizer: as many turns as fit, no fewer


def test_a_context_overflow_hidden_in_a_broken_stream_is_named_and_the_next_round_fits(writer, upstream):
    upstream.context_window = 200  # llama-cpp-python: 200, then a broken stream; not streamed: its 400
    messages = _history(8)  # ~360 words

    first = call(writer, messages=messages)

    assert first.status_code == 400
    error = first.json()["error"]
    assert (error["code"], error["type"], error["param"]) == ("context_length_exceeded", "invalid_request_error", "messages")
    assert error["message"].startswith("context_length_exceeded: the prompt (") and "context window of 200 tokens" in error["message"]
    from runs.models import Run

    with writer.context():
        run = Run.objects.get(pk=error["run_id"])
    assert (run.status, run.attempts) == ("error", 1)  # not retried
    assert [r.get("stream") for r in upstream.chat_requests] == [None]  # asked not streamed (issue 53): its 400 names it

    again = call(writer, messages=messages)  # the same conversation: trimmed to the window the gateway named

    assert again.status_code == 200, again.content
    sent = upstream.chat_requests[-1]["messages"]
    assert sent[-1]["content"] == "the last question" and sum(len(m["content"].split()) for m in sent) < 200
