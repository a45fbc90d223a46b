"""What the MCP server refuses, and that a refusal stores nothing: credentials (none, unknown,
revoked, another scope), keys limited to some agents, unknown or another org's agents, bad
arguments, malformed JSON-RPC, a credential in the input."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from django.db import connections
from mcp.shared.exceptions import MCPError

from tenancy.models import ApiKey
from tenancy.services import api_key_create, api_key_revoke
from tests.mcp_server.conftest import endpoint, make_agent, mcp_client, run, stored_runs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]

JSON_RPC = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def post(live, key: str | None, body, *, headers: dict | None = None) -> httpx.Response:
    auth = {"Authorization": f"Bearer {key}"} if key else {}
    content = body if isinstance(body, str) else json.dumps(body)
    return httpx.post(endpoint(live), content=content, headers={**JSON_RPC, **auth, **(headers or {})}, timeout=30)


def call_error(live, key: str, name: str, arguments) -> MCPError:
    async def go():
        async with mcp_client(live, key) as client:
            with pytest.raises(MCPError) as raised:
                await client.call_tool(name, arguments)
            return raised.value

    return run(go())


def test_no_or_an_unknown_credential_is_403_in_the_one_error_shape(live, org):
    for key in (None, "ak_" + "0" * 48):
        answer = post(live, key, INITIALIZE)
        assert answer.status_code == 403
        assert set(answer.json()) == {"status", "code", "error"} and answer.json()["code"] == "forbidden"


def revoke(org) -> None:
    """Revoke the org's key (in a thread of the test's loop, its connections closed after)."""
    try:
        api_key_revoke(org=org.org, key_id=ApiKey.objects.get(org=org.org).pk)
    finally:
        connections.close_all()


def test_a_revoked_key_is_refused_at_its_next_request(live, org):
    async def go():
        async with mcp_client(live, org.key) as client:
            listed = await client.list_tools()
            await asyncio.to_thread(revoke, org)
            with pytest.raises(Exception) as raised:
                await client.list_tools()
            return listed, raised.value

    listed, refused = run(go())

    assert "writer" in {t.name for t in listed.tools}
    assert isinstance(refused, MCPError)  # the SDK's client reports the HTTP refusal as an error response
    answer = post(live, org.key, INITIALIZE)  # what the server answered that request: the one 403
    assert answer.status_code == 403 and answer.json()["error"] == "the API key is unknown or revoked"


def test_a_key_limited_to_the_mcp_server_and_one_agent_sees_and_calls_only_that(live, org, upstream):
    make_agent(org, "helper", instructions="Help.")
    _, key = api_key_create(org=org.org, user=org.user, scope="mcp", allowed_agents=["writer"])

    async def go():
        async with mcp_client(live, key) as client:
            return [t.name for t in (await client.list_tools()).tools]

    assert run(go()) == ["writer", "_read_session", "_stop_session"]
    refused = call_error(live, key, "helper", {"input": "hi"})
    assert refused.code == -32602 and "'helper'" in refused.message
    elsewhere = httpx.get(f"{live.url}/v1/agents", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert elsewhere.status_code == 403 and "/v1/agents/mcp" in elsewhere.json()["error"]
    named_like_it = httpx.get(f"{live.url}/v1/agents/mcpbot", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert named_like_it.status_code == 403
    assert stored_runs(org) == []


def test_a_key_of_the_openai_scope_is_refused(live, org):
    _, key = api_key_create(org=org.org, user=org.user, scope="openai")
    answer = post(live, key, INITIALIZE)
    assert answer.status_code == 403 and answer.json()["code"] == "forbidden"


def test_an_unknown_or_another_orgs_agent_is_an_error_naming_the_tool(live, org, make_org):
    other = make_org("mcp-other")
    make_agent(other, "secret-agent", instructions="Never tell.")

    for name in ("nobody", "secret-agent"):
        refused = call_error(live, org.key, name, {"input": "hi"})
        assert refused.code == -32602 and f"unknown tool {name!r}" in refused.message
        assert "Never tell" not in refused.message
    assert stored_runs(org) == [] and stored_runs(other) == []


@pytest.mark.parametrize("arguments, says", [
    ({}, "argument 'input' is required"),
    ({"input": 7}, "argument 'input' must be text"),
    ({"input": "hi", "extra": 1}, "unknown argument 'extra'"),
    ({"input": "hi", "sessionId": 3}, "argument 'sessionId' must be text"),
])
def test_bad_arguments_are_invalid_params_and_start_nothing(live, org, arguments, says):
    refused = call_error(live, org.key, "writer", arguments)
    assert refused.code == -32602 and says in refused.message
    assert stored_runs(org) == []


def test_an_unknown_session_is_a_tool_error_in_the_one_shape(live, org, make_org, upstream):
    async def go():
        async with mcp_client(live, org.key) as client:
            return [await client.call_tool(name, arguments) for name, arguments in (
                ("_read_session", {"sessionId": "ses_nothing"}), ("_stop_session", {"sessionId": "ses_nothing"}),
                ("writer", {"input": "hi", "sessionId": "ses_nothing"}))]

    for result in run(go()):
        assert result.is_error and result.structured_content["status"] == 404 and result.structured_content["code"] == "not_found"
    assert stored_runs(org) == []


def test_a_credential_in_the_input_is_refused_and_nothing_is_stored(live, org):
    async def go():
        async with mcp_client(live, org.key) as client:
            return await client.call_tool("writer", {"input": "my key is AKIAIOSFODNN7EXAMPLE ok"})

    result = run(go())

    assert result.is_error and result.structured_content["code"] == "secret_in_transcript"
    assert "AKIAIOSFODNN7EXAMPLE" not in str(result.model_dump())
    assert stored_runs(org) == []


def test_malformed_json_rpc_answers_the_protocols_error_codes(live, org):
    def code(body) -> int:
        answer = post(live, org.key, body)
        return answer.json()["error"]["code"]

    assert code("{not json") == -32700
    for not_a_message in ({"jsonrpc": "2.0", "id": 1}, {"jsonrpc": "1.0", "id": 1, "method": "initialize"}, {"id": 1, "method": 5}):
        assert code(not_a_message) == -32602  # the SDK's answer to a body that is JSON but no JSON-RPC message
    opened = post(live, org.key, INITIALIZE)
    assert opened.status_code == 200
    session = {"Mcp-Session-Id": opened.headers["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"}
    post(live, org.key, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    unknown = post(live, org.key, {"jsonrpc": "2.0", "id": 2, "method": "tools/nothing"}, headers=session)
    assert '"code":-32601' in unknown.text.replace(" ", "")
