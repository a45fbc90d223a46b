"""Hostile and careless bodies on POST …/chat/completions (Django test client; the views are plain
Django views): every one a 4xx OpenAI error object before any run starts — nothing stored, nothing
sent to the gateway, nothing billed, never a 500 or a recorded failed run."""

from __future__ import annotations

import json

import pytest

from tests.agents.conftest import fund, make_agent
from tests.openai_api.conftest import BASE_PATH, debits, stored_runs

pytestmark = pytest.mark.django_db

HI = [{"role": "user", "content": "hi"}]


def nested(depth: int) -> str:
    """Return a JSON object `depth` levels deep: `{"a":{"a":…1…}}`."""
    return '{"a":' * depth + "1" + "}" * depth


def post(org, raw: str):
    return org.client.generic("POST", BASE_PATH + "/chat/completions", raw, content_type="application/json")


@pytest.fixture
def org(org_a, upstream):
    fund(org_a)
    make_agent(org_a, "writer")
    return org_a


def assert_refused(org, upstream, response, status: int = 400) -> dict:
    assert response.status_code == status, response.content
    error = response.json()["error"]
    assert set(error) >= {"message", "type", "param", "code"}
    assert stored_runs(org) == [] and debits(org) == [] and upstream.chat_requests == []
    return error


def test_an_unpaired_surrogate_escape_is_a_400_not_a_500(org, upstream):
    raw = '{"model":"writer","messages":[{"role":"user","content":"a \\ud800 b"}]}'

    error = assert_refused(org, upstream, post(org, raw))

    assert error["code"] == "invalid_request" and "surrogate" in error["message"]
def test_tool_parameters_nested_too_deep_are_a_400_before_the_run_starts(org, upstream):
    raw = ('{"model":"writer","messages":[{"role":"user","content":"hi"}],'
           '"tools":[{"type":"function","function":{"name":"f","parameters":' + nested(900) + "}}]}")

    error = assert_refused(org, upstream, post(org, raw))

    assert error["code"] == "invalid_request" and error["param"] == "tools[0].function.parameters"


def test_a_tool_call_carries_only_the_fields_a_gateway_reads(org, upstream):
    call = '{"id":"c1","type":"function","function":{"name":"f","arguments":"{}","junk":' + nested(900) + '},"junk":' + nested(900) + "}"
    raw = ('{"model":"writer","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[' + call
           + ']},{"role":"tool","tool_call_id":"c1","content":"ok"}]}')

    response = post(org, raw)

    assert response.status_code == 200, response.content
    sent = upstream.chat_requests[0]["messages"]
    assert sent[-2]["tool_calls"] == [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert [run.status for run in stored_runs(org)] == ["ok"]


GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # a GitHub token shape the scanner knows


@pytest.mark.parametrize("where", ["description", "parameters"])
def test_a_credential_in_a_tool_definition_is_a_422_and_never_sent(org, upstream, where):
    function = {"name": "deploy", "description": f"deploy with {GITHUB}"} if where == "description" else {
        "name": "deploy", "parameters": {"type": "object", "properties": {"token": {"type": "string", "default": GITHUB}}}}

    response = post(org, json.dumps({"model": "writer", "messages": HI, "tools": [{"type": "function", "function": function}]}))

    error = assert_refused(org, upstream, response, status=422)
    assert error["code"] == "secret_in_transcript" and error["findings"] and GITHUB not in response.content.decode()


OPENAI_KEY = "sk-proj-" + ("Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 3)[:74] + "T3BlbkFJ" + ("Zy9xWv8uTs7rQp6oNm5lKj4iHg3fEd2c" * 3)[:74]  # an OpenAI project key


@pytest.mark.parametrize(("field", "value"), [
    ("stop", [f"END {GITHUB}"]),
    ("user", f"alice {OPENAI_KEY}"),
    ("response_format", {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object", "description": f"use {GITHUB}"}}}),
    ("messages", [{"role": "user", "content": f"my token is {OPENAI_KEY}"}]),
])
def test_a_credential_the_caller_wrote_in_any_field_is_a_422_naming_it_and_never_sent(org, upstream, field, value):
    body = {"model": "writer", "messages": HI, field: value}

    response = post(org, json.dumps(body))

    error = assert_refused(org, upstream, response, status=422)
    assert error["code"] == "secret_in_transcript" and error["type"] == "invalid_request_error"
    assert {f["field"] for f in error["findings"]} == {field}
    assert GITHUB not in response.content.decode() and OPENAI_KEY not in response.content.decode()


@pytest.mark.parametrize("path", ["/chat/completions", "/models", "/models/writer"])
def test_a_credential_in_the_query_string_is_a_422_and_nothing_runs(org, upstream, path):
    method = "POST" if path == "/chat/completions" else "GET"

    response = org.client.generic(method, f"{BASE_PATH}{path}?api_key={GITHUB}", json.dumps({"model": "writer", "messages": HI}),
                                  content_type="application/json")

    error = assert_refused(org, upstream, response, status=422)
    assert error["code"] == "secret_in_transcript" and [f["field"] for f in error["findings"]] == ["?api_key"]
    assert GITHUB not in response.content.decode()
    # An ordinary query parameter is no credential: the call goes through.
    assert org.client.get(f"{BASE_PATH}/models?api-version=2024-06-01").status_code == 200
