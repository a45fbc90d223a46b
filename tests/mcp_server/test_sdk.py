"""The `mcp` SDK's own client talks to the MCP server on a real daphne: tools/list, a call of an
agent (a recorded, billed run of kind `mcp`), a session continued, read and stopped."""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import connections

from tests.mcp_server.conftest import FEE_CENTS, debits, make_agent, mcp_client, run, stored_runs, until
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def test_list_tools_names_each_agent_and_the_session_tools(live, org):
    make_agent(org, "helper", instructions="Help.\nMore lines.")

    async def go():
        async with mcp_client(live, org.key) as client:
            return (await client.list_tools()).tools

    tools = {t.name: t for t in run(go())}

    assert sorted(tools) == ["_read_session", "_stop_session", "helper", "writer"]
    assert tools["writer"].description == "Writes short answers" and tools["helper"].description == "Help."
    assert tools["writer"].input_schema["required"] == ["input"]
    assert set(tools["writer"].input_schema["properties"]) == {"input", "sessionId"}
    assert tools["writer"].output_schema["required"] == ["output", "runId", "sessionId", "status"]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_call_is_a_recorded_billed_run_of_kind_mcp(live, org, upstream, mode):
    upstream.script(Reply(content="Four.", prompt_tokens=5, completion_tokens=2))

    async def go():
        async with mcp_client(live, org.key, mode=mode) as client:
            return await client.call_tool("writer", {"input": "2+2?"})

    result = run(go())

    assert not result.is_error and result.content[0].text == "Four."
    [stored] = stored_runs(org)
    assert result.structured_content == {"output": "Four.", "runId": stored.id, "sessionId": stored.session_id,
                                         "conversationId": result.structured_content["conversationId"], "status": "ok"}
    assert (stored.kind, stored.status, stored.input, stored.output) == ("mcp", "ok", "2+2?", "Four.")
    assert [(d.run_id, d.amount_cents) for d in debits(org)] == [(stored.id, -FEE_CENTS)]
    assert upstream.chat_requests[-1]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_a_progress_token_gets_the_reply_as_it_is_written(live, org, upstream):
    upstream.script(Reply(content="Once upon a time.", chunk_size=5))
    heard: list[tuple[float, str | None]] = []

    async def progress(value, total, message):
        heard.append((value, message))

    async def go():
        async with mcp_client(live, org.key) as client:
            return await client.call_tool("writer", {"input": "A story"}, progress_callback=progress)

    result = run(go())

    assert result.content[0].text == "Once upon a time."
    assert "".join(message for _, message in heard) == "Once upon a time." and len(heard) > 1
    assert [value for value, _ in heard] == sorted(value for value, _ in heard)  # progress only grows


def test_session_id_continues_the_conversation_and_read_session_shows_its_turns(live, org, upstream):
    upstream.script(Reply(content="Hello Ada."), Reply(content="Your name is Ada."))

    async def go():
        async with mcp_client(live, org.key) as client:
            first = await client.call_tool("writer", {"input": "I am Ada"})
            second = await client.call_tool("writer", {"input": "Who am I?", "sessionId": first.structured_content["sessionId"]})
            read = await client.call_tool("_read_session", {"sessionId": second.structured_content["sessionId"]})
            return first, second, read

    first, second, read = run(go())

    assert second.structured_content["conversationId"] == first.structured_content["conversationId"]
    assert second.structured_content["sessionId"] != first.structured_content["sessionId"]
    assert upstream.chat_requests[-1]["messages"][1:] == [
        {"role": "user", "content": "I am Ada"}, {"role": "assistant", "content": "Hello Ada."}, {"role": "user", "content": "Who am I?"}]
    assert read.structured_content["status"] == "done"
    assert [(t["role"], t["text"]) for t in read.structured_content["turns"]] == [("user", "Who am I?"), ("assistant", "Your name is Ada.")]


def session_of(org) -> str:
    """Return the session id of the org's one run (in a thread of the test's loop)."""
    try:
        return stored_runs(org)[0].session_id
    finally:
        connections.close_all()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_cancelling_a_call_stops_its_run_unbilled(live, org, upstream, mode):
    hold = threading.Event()
    upstream.script(Reply(content="too late", hold=hold))

    async def go():
        async with mcp_client(live, org.key, mode=mode) as client:
            call = asyncio.ensure_future(client.call_tool("writer", {"input": "slow"}))
            await until(lambda: [r.status for r in stored_runs(org)] == ["running"])
            call.cancel()
            await until(lambda: stored_runs(org)[0].status == "error")
            return await client.call_tool("_read_session", {"sessionId": await asyncio.to_thread(session_of, org)})

    try:
        read = run(go())
    finally:
        hold.set()

    [stored] = stored_runs(org)
    assert (stored.kind, stored.status, stored.finish_reason) == ("mcp", "error", "stopped")
    assert read.structured_content["status"] == "error"
    assert debits(org) == []


def test_stop_session_stops_a_call_in_flight(live, org, upstream):
    hold = threading.Event()
    upstream.script(Reply(content="too late", hold=hold))

    async def go():
        async with mcp_client(live, org.key) as client:
            call = asyncio.ensure_future(client.call_tool("writer", {"input": "slow"}))
            await until(lambda: [r.status for r in stored_runs(org)] == ["running"])
            stopped = await client.call_tool("_stop_session", {"sessionId": await asyncio.to_thread(session_of, org)})
            return stopped, await call

    try:
        stopped, result = run(go())
    finally:
        hold.set()

    assert stopped.structured_content["stopped"] is True and not stopped.is_error
    assert result.is_error and result.structured_content["status"] == "error"
    [stored] = stored_runs(org)
    assert (stored.status, stored.finish_reason) == ("error", "stopped") and debits(org) == []


def test_an_agent_with_approval_rules_answers_that_the_run_waits_and_how_to_approve(live, org, upstream):
    make_agent(org, "careful", instructions="Be careful.", tools=["calculator"], approval={"tools": ["calculator"]})
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "9-2"})]))

    async def go():
        async with mcp_client(live, org.key) as client:
            return await client.call_tool("careful", {"input": "what is 9-2?"})

    result = run(go())

    [stored] = stored_runs(org)
    assert (stored.kind, stored.status) == ("mcp", "waiting")
    assert not result.is_error and result.structured_content["status"] == "waiting"
    assert result.structured_content["sessionId"] == stored.session_id and result.structured_content["output"] == ""
    assert f"/v1/agents/sessions/{stored.session_id}/approve" in result.content[0].text
    assert debits(org) == []
