"""The `mcp` SDK's own client talks to the MCP server on a real daphne: tools/list, a call of an
agent (a recorded, billed run of kind `mcp`), a session continued, read and stopped."""

from __future__ import annotations

import pytest

from tests.mcp_server.conftest import FEE_CENTS, debits, make_agent, mcp_client, run, stored_runs
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
