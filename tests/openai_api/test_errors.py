"""Errors of the OpenAI-compatible endpoint, as the official SDK sees them: OpenAI's error object
with this platform's code, the right exception class and status, nothing stored, nothing billed."""

from __future__ import annotations

import json
import secrets
import string

import httpx
import openai
import pytest

from agents.services import agent_create_external
from tenancy.models import ApiKey
from tenancy.services import api_key_revoke
from tests.openai_api.conftest import BASE_PATH, debits, make_agent, sdk, stored_runs
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

HI = [{"role": "user", "content": "hi"}]


def github_token() -> str:
    return "ghp_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(36))


def error_of(exc: openai.APIStatusError) -> dict:
    """Return the error object the server answered (the SDK keeps `body["error"]` as `body`)."""
    body = exc.body
    assert set(body) >= {"message", "type", "param", "code"}, body
    assert exc.response.json() == {"error": body}
    return body


def assert_nothing_happened(org, upstream) -> None:
    assert stored_runs(org) == []
    assert debits(org) == []
    assert upstream.chat_requests == []


def raw_post(client: openai.OpenAI, body: dict):
    """POST a body the typed SDK method would not send (a missing model, a string `stream`)."""
    return client.post("/chat/completions", body=body, cast_to=object)


@pytest.mark.parametrize(
    "body,param,words",
    [
        ({"model": "writer", "messages": []}, "messages", "'messages' must be a non-empty list"),
        ({"model": "writer"}, "messages", "'messages' must be a non-empty list"),
        ({"model": "writer", "messages": [{"role": "robot", "content": "hi"}]}, "messages[0].role",
         "messages[0].role must be one of: system, user, assistant, tool"),
        ({"model": "writer", "messages": [{"role": "user", "content": "x" * (128 * 1024 + 1)}]}, "messages[0].content",
         "messages[0].content is over 128 KiB"),
        ({"model": "writer", "messages": HI, "tools": [{"name": "get_weather"}]}, "tools[0]",
         "tools[0] must be an OpenAI function definition"),
        ({"model": "writer", "messages": HI, "tools": [{"type": "function", "function": {"name": "bad name!"}}]},
         "tools[0].function.name", "must match"),
        ({"model": "writer", "messages": HI, "stream": "yes"}, "stream", "'stream' must be a boolean"),
        ({"messages": HI}, "model", "'model' is required"),
        ({"model": "writer", "messages": HI, "temperature": 3}, "temperature", "'temperature' must be a number from 0 to 2"),
    ],
)
def test_bad_input_is_a_400_invalid_request_error_and_nothing_happens(org, client, upstream, body, param, words):
    with pytest.raises(openai.BadRequestError) as refused:
        raw_post(client, body)

    assert refused.value.status_code == 400
    error = error_of(refused.value)
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_request", param)
    assert words in error["message"]
    assert_nothing_happened(org, upstream)


def test_a_body_that_is_not_json_is_a_400(org, live, upstream):
    response = httpx.post(live.url + BASE_PATH + "/chat/completions", content=b"{not json", timeout=30,
                          headers={"Authorization": f"Bearer {org.key}", "Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_request"
    assert_nothing_happened(org, upstream)


def test_an_unknown_agent_is_a_404_model_not_found(org, client, upstream):
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="ghost", messages=HI)

    error = error_of(refused.value)
    assert (refused.value.status_code, error["code"], error["param"], error["type"]) == (404, "model_not_found", "model",
                                                                                        "invalid_request_error")
    assert_nothing_happened(org, upstream)


def test_a_credential_in_a_user_message_is_a_422_and_nothing_is_stored_or_billed(org, client, upstream):
    token = github_token()

    with pytest.raises(openai.UnprocessableEntityError) as refused:
        client.chat.completions.create(model="writer", messages=[{"role": "user", "content": "ok"},
                                                                 {"role": "assistant", "content": "yes?"},
                                                                 {"role": "user", "content": f"use {token} please"}])

    error = error_of(refused.value)
    assert (refused.value.status_code, error["code"]) == (422, "secret_in_transcript")
    assert error["findings"] and token not in json.dumps(error)
    assert_nothing_happened(org, upstream)


def test_a_missing_or_wrong_key_is_a_401(org, live, upstream):
    for key in ("ak_" + "0" * 48, "not-a-key"):  # the SDK itself refuses an empty key; no key: below
        with pytest.raises(openai.AuthenticationError) as refused:
            sdk(live, key).chat.completions.create(model="writer", messages=HI)
        error = error_of(refused.value)
        assert (refused.value.status_code, error["code"], error["type"]) == (401, "invalid_api_key", "authentication_error")
    response = httpx.get(live.url + BASE_PATH + "/models", timeout=30)
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
    assert_nothing_happened(org, upstream)


def test_a_revoked_key_is_a_401(org, live, upstream):
    api_key_revoke(org=org.org, key_id=ApiKey.objects.get(org=org.org).pk)
    with pytest.raises(openai.AuthenticationError):
        sdk(live, org.key).models.list()


def test_an_org_that_cannot_pay_gets_a_402(make_org, live, upstream):
    poor = make_org("poor")
    response = poor.client.post("/v1/agents", {"name": "writer"}, content_type="application/json")
    assert response.status_code == 201

    with pytest.raises(openai.APIStatusError) as refused:
        sdk(live, poor.key).chat.completions.create(model="writer", messages=HI)

    error = error_of(refused.value)
    assert (refused.value.status_code, error["code"], error["type"]) == (402, "insufficient_balance", "insufficient_quota")
    assert_nothing_happened(poor, upstream)


def test_an_external_agent_is_a_409(org, client, upstream):
    with org.context():
        agent_create_external(name="elsewhere")

    with pytest.raises(openai.ConflictError) as refused:
        client.chat.completions.create(model="elsewhere", messages=HI)

    assert error_of(refused.value)["code"] == "agent_external"
    assert_nothing_happened(org, upstream)


def test_a_run_that_failed_is_a_502_naming_the_recorded_run(org, client, upstream):
    upstream.script(Reply(status=400, error_body={"error": {"message": "unknown model parameter"}}))

    with pytest.raises(openai.InternalServerError) as failed:
        client.chat.completions.create(model="writer", messages=HI)

    error = error_of(failed.value)
    [run] = stored_runs(org)
    assert (failed.value.status_code, error["code"], error["type"], error["param"]) == (502, "run_failed", "api_error", None)
    assert error["run_id"] == run.id and error["session_id"] == run.session_id
    assert (run.kind, run.status) == ("openai", "error") and error["message"] == run.error and "unknown model parameter" in run.error
    assert debits(org) == []


def test_a_run_that_fails_while_streaming_ends_with_an_error_chunk_then_done(org, client, live, upstream):
    upstream.script(Reply(status=400, error_body={"error": {"message": "no such model"}}))

    with pytest.raises(openai.APIError) as failed:
        list(client.chat.completions.create(model="writer", messages=HI, stream=True))

    [run] = stored_runs(org)
    assert run.error in str(failed.value) and (run.kind, run.status) == ("openai", "error")

    upstream.script(Reply(status=400, error_body={"error": {"message": "no such model"}}))
    body = {"model": "writer", "messages": HI, "stream": True}
    with httpx.stream("POST", live.url + BASE_PATH + "/chat/completions", json=body, timeout=30,
                      headers={"Authorization": f"Bearer {org.key}"}) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line and not line.startswith(":")]
    assert lines[-1] == "data: [DONE]"
    error = json.loads(lines[-2][6:])["error"]
    second = stored_runs(org)[-1]
    assert (error["code"], error["run_id"], error["message"]) == ("run_failed", second.id, second.error)
    assert debits(org) == []


def test_a_wrong_method_or_an_unknown_route_answers_the_openai_error_object(org, live):
    headers = {"Authorization": f"Bearer {org.key}"}
    wrong = httpx.get(live.url + BASE_PATH + "/chat/completions", headers=headers, timeout=30)
    assert wrong.status_code == 405 and wrong.headers["Allow"] == "POST"
    assert wrong.json()["error"]["code"] == "method_not_allowed"
    unknown = httpx.post(live.url + BASE_PATH + "/embeddings", headers=headers, json={}, timeout=30)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "not_found"
    nul = httpx.post(live.url + BASE_PATH + "/chat/completions", headers=headers, timeout=30,
                     json={"model": "writer", "messages": [{"role": "user", "content": "a\u0000b"}]})
    assert nul.status_code == 400 and nul.json()["error"]["code"] == "invalid_request"


def test_a_body_over_one_mib_is_a_413(org, client, upstream):
    messages = [{"role": "user", "content": "x" * (100 * 1024)} for _ in range(12)]

    with pytest.raises(openai.APIStatusError) as refused:
        client.chat.completions.create(model="writer", messages=messages)

    error = error_of(refused.value)
    assert (refused.value.status_code, error["code"]) == (413, "payload_too_large")
    assert_nothing_happened(org, upstream)


def test_an_agent_with_approval_rules_is_refused_with_400_approval_unsupported(org, client, upstream):
    make_agent(org, "careful", tools=["calculator"], approval={"tools": ["calculator"]})

    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="careful", messages=HI)

    error = error_of(refused.value)
    assert (refused.value.status_code, error["code"], error["param"]) == (400, "approval_unsupported", "model")
    assert "approve" in error["message"]
    assert_nothing_happened(org, upstream)


# -- a gateway's refusal of a streamed call is the same 400 (issue 53, decision 1533) ----------------

#: A prompt over the context window (its bytes ≥ `agents.inference.PROBE_MIN_BYTES`: an empty stream is probed).
LONG = [{"role": "user", "content": "word " * 3000}]


def recorded(server: str, exchange: str) -> dict:
    """Return the error body a gateway transcript's exchange answered (tests/support/transcripts/)."""
    from tests.support.replay import transcript

    return transcript(server)["exchanges"][exchange]["response"]["json"]


def overflow_script(upstream) -> None:
    """llama-cpp-python 0.3.36 over its context, as recorded: the streamed request answered 200 with an
    empty body, the one-token probe its 400 `context_length_exceeded` (the recorded body)."""
    upstream.script(Reply(empty=True), Reply(status=400, error_body=recorded("llama-cpp-python-recorded", "context_overflow_probe")))


def test_a_streamed_call_over_the_context_raises_the_sdks_bad_request_error_with_nothing_streamed(org, client, upstream):
    overflow_script(upstream)

    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="writer", messages=LONG, stream=True)

    error = error_of(refused.value)
    [run] = stored_runs(org)
    assert (refused.value.status_code, error["code"], error["type"], error["param"]) == (
        400, "context_length_exceeded", "invalid_request_error", "messages")
    assert refused.value.response.headers["content-type"] == "application/json"
    assert (error["run_id"], refused.value.response.headers["x-agents-run-id"]) == (run.id, run.id)
    assert error["message"] == run.error and run.error.startswith(
        "context_length_exceeded: the prompt (3011 tokens) is over the model's context window of 2048 tokens")
    assert (run.kind, run.status, run.attempts) == ("openai", "error", 1)
    assert [r.get("max_tokens") for r in upstream.chat_requests][1:] == [1]  # the prompt asked once, then the one-token probe
    assert debits(org) == []


def test_a_streamed_call_whose_field_the_gateway_refuses_raises_bad_request_naming_it(org, client, upstream):
    upstream.script(Reply(status=500, error_body=recorded("llama-cpp-python", "response_format_refused")))

    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model="writer", messages=HI, stream=True,
                                       response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}}})

    error = error_of(refused.value)
    [run] = stored_runs(org)
    assert (error["code"], error["param"], error["run_id"]) == ("gateway_refused", "response_format.type", run.id)
    assert len(upstream.chat_requests) == 1 and upstream.chat_requests[0]["stream"] is True  # a 500, yet not retried
    assert debits(org) == []


@pytest.mark.parametrize("surface", ["run", "chat"])
def test_a_streamed_run_or_round_over_the_context_is_the_400_of_the_call_without_stream(org, live, upstream, surface):
    """The same on the platform's own streams, served by daphne (the held answer awaited on its loop)."""
    overflow_script(upstream)
    url, body = ((f"/v1/agents/writer/run", {"input": LONG[0]["content"], "stream": True}) if surface == "run" else
                 ("/v1/agents/chat", {"agent": "writer", "messages": LONG, "stream": True}))

    answer = httpx.post(live.url + url, json=body, headers={"Authorization": f"Bearer {org.key}"}, timeout=60)

    [run] = stored_runs(org)
    assert (answer.status_code, answer.headers["content-type"], answer.headers["x-agents-run-id"]) == (400, "application/json", run.id)
    got = answer.json()
    assert got["code"] == "context_length_exceeded" and got["error"] == run.error
    if surface == "run":  # the failed run with its code, as the call without `stream` answers
        assert (got["id"], got["status"]) == (run.id, "error")
    else:
        assert (got["status"], got["runId"]) == (400, run.id) and "conversationId" in got and "run" not in got
    assert (run.status, run.attempts) == ("error", 1) and debits(org) == []


def test_a_failure_after_the_first_chunk_stays_an_error_chunk_of_the_200(org, client, upstream):
    upstream.script(Reply(content="first part of the answer and more", chunk_size=6, fail_after=3))

    stream = client.chat.completions.create(model="writer", messages=HI, stream=True)
    received = []
    with pytest.raises(openai.APIError) as failed:
        for chunk in stream:
            received.append(chunk)

    written = "".join(c.choices[0].delta.content or "" for c in received if c.choices)
    assert stream.response.status_code == 200 and written and "first part of the answer".startswith(written)
    [run] = stored_runs(org)
    assert (run.status, run.output, len(upstream.chat_requests)) == ("error", written, 1)
    assert "while the reply was being written" in run.error and run.error in str(failed.value)
