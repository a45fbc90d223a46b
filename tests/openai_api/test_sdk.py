"""The official `openai` SDK talks to an agent through the OpenAI-compatible endpoint on a real
daphne: models, completions streamed and not, usage, tools, each call a recorded, billed run."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from agents.services import agent_create_external
from tests.openai_api.conftest import BASE_PATH, OPENAI_FEE_CENTS, debits, make_agent, sdk, stored_runs
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


def test_models_lists_the_orgs_agents_by_name(org, client):
    make_agent(org, "analyst")
    with org.context():
        agent_create_external(name="elsewhere")  # its brain runs elsewhere: not a model here

    models = client.models.list()

    assert [m.id for m in models.data] == ["analyst", "writer"]
    assert {(m.object, m.owned_by) for m in models.data} == {("model", org.slug)}
    assert all(isinstance(m.created, int) and m.created > 0 for m in models.data)
    assert client.models.retrieve("writer").id == "writer"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("ghost")
    assert missing.value.status_code == 404 and missing.value.body["code"] == "model_not_found"


def test_a_completion_runs_the_agent_and_is_recorded_and_billed(org, client, upstream):
    upstream.script(Reply(content="Bonjour.", prompt_tokens=5, completion_tokens=3))

    completion = client.chat.completions.create(
        model="writer",
        messages=[{"role": "system", "content": "Answer in French."}, {"role": "user", "content": "Say hello"}],
        max_tokens=50,
        temperature=0.2,
    )

    assert completion.object == "chat.completion" and completion.model == "writer"
    [choice] = completion.choices
    assert (choice.message.role, choice.message.content, choice.finish_reason) == ("assistant", "Bonjour.", "stop")
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens, completion.usage.total_tokens) == (5, 3, 8)
    # The agent's instructions first, then the caller's messages as sent.
    assert upstream.chat_requests[-1]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": "Say hello"},
    ]
    [run] = stored_runs(org)
    assert (run.id, run.kind, run.status, run.input, run.output, run.agent_name) == (
        completion.id, "openai", "ok", "Say hello", "Bonjour.", "writer")
    assert run.session_id and run.fee_cents == OPENAI_FEE_CENTS
    assert [(d.run_id, d.amount_cents) for d in debits(org)] == [(run.id, -OPENAI_FEE_CENTS)]


def test_the_agent_can_be_named_by_its_id(org, client, upstream):
    agent_id = org.client.get("/v1/agents/writer").json()["id"]
    upstream.script(Reply(content="by id"))

    completion = client.chat.completions.create(model=agent_id, messages=[{"role": "user", "content": "hi"}])

    assert completion.choices[0].message.content == "by id" and completion.model == "writer"


def test_the_run_is_watchable_through_its_session(org, client, upstream):
    upstream.script(Reply(content="watched"))

    raw = client.chat.completions.with_raw_response.create(model="writer", messages=[{"role": "user", "content": "hi"}])

    completion = raw.parse()
    session_id = raw.headers["X-Agents-Session-Id"]
    assert raw.headers["X-Agents-Run-Id"] == completion.id
    events = org.client.get(f"/v1/agents/sessions/{session_id}/events").json()["events"]
    texts = [e["payload"].get("text") for e in events if e["kind"] == "message"]
    assert texts == ["hi", "watched"]


def test_a_streamed_completion_arrives_as_chunks_with_usage(org, client, upstream):
    upstream.script(Reply(content="Streamed reply.", prompt_tokens=4, completion_tokens=2))

    chunks = list(client.chat.completions.create(
        model="writer", messages=[{"role": "user", "content": "stream please"}], stream=True,
        stream_options={"include_usage": True},
    ))

    assert {c.object for c in chunks} == {"chat.completion.chunk"} and len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert content == "Streamed reply."
    finals = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finals == ["stop"]
    usage = chunks[-1]
    assert usage.choices == [] and (usage.usage.prompt_tokens, usage.usage.completion_tokens, usage.usage.total_tokens) == (4, 2, 6)
    [run] = stored_runs(org)
    assert (run.id, run.kind, run.status, run.output) == (chunks[0].id, "openai", "ok", "Streamed reply.")
    assert [d.run_id for d in debits(org)] == [run.id]


def test_a_stream_is_data_lines_ending_with_done(org, live, upstream):
    upstream.script(Reply(content="raw"))
    body = {"model": "writer", "messages": [{"role": "user", "content": "hi"}], "stream": True}

    with httpx.stream("POST", live.url + BASE_PATH + "/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {org.key}"}) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line and not line.startswith(":")]

    assert all(line.startswith("data: ") for line in lines) and lines[-1] == "data: [DONE]"
    chunks = [json.loads(line[6:]) for line in lines[:-1]]
    assert "usage" not in chunks[-1] and chunks[-1]["choices"][0]["finish_reason"] == "stop"


def test_server_side_tools_run_here_and_client_tools_come_back_as_tool_calls(org, client, upstream):
    make_agent(org, "forecaster", tools=["calculator"])
    upstream.script(
        Reply(tool_calls=[("calculator", {"expression": "2+2"})]),  # the agent's own tool: run here
        Reply(tool_calls=[("get_weather", {"city": "Oslo"})]),  # the caller's tool: handed back
    )
    messages = [{"role": "user", "content": "Weather in Oslo, and 2+2?"}]

    first = client.chat.completions.create(model="forecaster", messages=messages, tools=[WEATHER])

    [choice] = first.choices
    assert choice.finish_reason == "tool_calls"
    [call] = choice.message.tool_calls
    assert (call.type, call.function.name, json.loads(call.function.arguments)) == ("function", "get_weather", {"city": "Oslo"})
    tool_messages = [m for m in upstream.chat_requests[1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_messages] == ["4"]
    assert [t["function"]["name"] for t in upstream.chat_requests[0]["tools"]] == ["calculator", "get_weather"]

    upstream.script(Reply(content="Sunny, and 4."))
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    second = client.chat.completions.create(model="forecaster", messages=messages, tools=[WEATHER])

    assert (second.choices[0].message.content, second.choices[0].finish_reason) == ("Sunny, and 4.", "stop")
    sent = upstream.chat_requests[-1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.id and sent[-1] == {"role": "tool", "tool_call_id": call.id, "content": "sunny"}
    assert [(r.kind, r.status) for r in stored_runs(org)] == [("openai", "ok"), ("openai", "ok")]


def test_client_tool_calls_stream_as_a_tool_calls_chunk(org, client, upstream):
    upstream.script(Reply(tool_calls=[("get_weather", {"city": "Rome"})]))

    chunks = list(client.chat.completions.create(model="writer", messages=[{"role": "user", "content": "Rome?"}],
                                                 tools=[WEATHER], stream=True))

    calls = [tc for c in chunks if c.choices for tc in (c.choices[0].delta.tool_calls or [])]
    assert [(tc.index, tc.function.name, json.loads(tc.function.arguments)) for tc in calls] == [(0, "get_weather", {"city": "Rome"})]
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["tool_calls"]


def test_another_orgs_agent_is_not_found(org, make_org, live, upstream):
    other = make_org("other")
    theirs = make_agent(other, "secret-agent")

    for ref in ("secret-agent", theirs["id"]):
        with pytest.raises(openai.NotFoundError) as refused:
            sdk(live, org.key).chat.completions.create(model=ref, messages=[{"role": "user", "content": "hi"}])
        assert refused.value.body["code"] == "model_not_found"
    assert [m.id for m in sdk(live, org.key).models.list().data] == ["writer"]
    assert stored_runs(org) == [] and stored_runs(other) == [] and upstream.chat_requests == []
