"""A gateway's refusal is the caller's error (issue 53 item 2), on gateways replayed from their
transcripts (`tests/support/transcripts/`: llama-cpp-python and LiteLLM recorded, vLLM and the
field refusals written from the servers' source and documented error bodies, each file says which).

* a context overflow is a 400 `context_length_exceeded` on every surface — `/run`, chat, chat
  completions, plain and streamed, with tools or not — and the prompt is never re-sent (no retry,
  no failover; a streamed call's one-token probe is the only other request; a call not streamed is
  asked not streamed and needs none). A streamed call holds its headers until the first piece of
  the reply, so a refusal before it is the same 400 as the call without `stream` (decision 1533);
* a gateway refusing a field the caller sent to chat completions is the caller's 400
  `gateway_refused` naming it (`param`), asked once, no failover, streamed or not; a refusal of
  what the platform composed (the agent's model) stays the 502 `run_failed`.
"""

from __future__ import annotations

import pytest

from agents import inference
from tests.agents.conftest import make_agent, run, stored_runs
from tests.support.replay import Replay

pytestmark = pytest.mark.django_db

OPENAI = "/v1/agents/openai/v1/chat/completions"
LONG = "word " * 3000
MODELS = {"llama-cpp-python-recorded": "gemma-3-270m", "litellm-proxy-recorded": "local-gemma", "vllm": "qwen2.5-0.5b",
          "llama-cpp-python": "gemma-3-270m", "litellm-proxy": "local-gemma"}


@pytest.fixture(scope="module")
def replay_server():
    server = Replay().start()
    yield server
    server.stop()


@pytest.fixture
def replay(replay_server, settings):
    replay_server.reset()
    settings.INFERENCE_BASE_URL = replay_server.base_url
    settings.INFERENCE_API_KEY = "test-key"
    settings.AGENTS_FAILOVER_MODEL = "failover-model"  # a refusal must not fail over (a request to it would be unplayed: 404)
    inference.reset_caches()
    yield replay_server
    inference.reset_caches()
    assert replay_server.unplayed == 0


def _chunks(response) -> list:
    from tests.openai_api.test_gateways import _chunks as read

    return read(response)


def _call(org, server: str, surface: str, **fields):
    tools = surface.endswith("+tools")
    make_agent(org, "long", model=MODELS[server], **({"tools": ["calculator"]} if tools else {}))
    streamed = {"stream": True} if "stream" in surface else {}
    if surface.startswith("run"):
        return org.client.post("/v1/agents/long/run", {"input": LONG, **streamed}, content_type="application/json")
    if surface.startswith("chat round"):
        return org.client.post("/v1/agents/chat", {"messages": [{"role": "user", "content": LONG}], "agent": "long", **streamed},
                               content_type="application/json")
    body = {"model": "long", "messages": [{"role": "user", "content": fields.pop("content", LONG)}], **fields}
    if "stream" in surface:
        body["stream"] = True
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]
    return org.client.post(OPENAI, body, content_type="application/json")


def _full_requests(replay) -> list[dict]:
    """The chat completions asked for the prompt itself (a one-token probe is not one)."""
    return [r for r in replay.chat_requests if r.get("max_tokens") != 1]


def _overflow_named(response, surface: str) -> dict:
    """Assert the answer of `surface` names the overflow as a 400 `context_length_exceeded`, streamed
    or not (a streamed one before any byte of its stream, in the surface's error shape); return its error."""
    assert not response.streaming and response["Content-Type"] == "application/json"
    body = response.json()
    assert response.status_code == 400, body
    if surface.startswith("chat completions"):
        error = body["error"]
        assert error["type"] == "invalid_request_error" and error["param"] == "messages"
        return {"code": error["code"], "error": error["message"], "run": error["run_id"]}
    if surface.startswith("chat round"):
        return {"code": body["code"], "error": body["error"], "run": body["runId"]}
    assert body["status"] == "error"  # /run: the failed run, with the code
    return {"code": body["code"], "error": body["error"], "run": body["id"]}


SURFACES = ["run", "run+tools", "run stream", "run stream+tools", "chat round", "chat round+tools", "chat round stream",
            "chat round stream+tools", "chat completions", "chat completions+tools", "chat completions stream",
            "chat completions stream+tools"]


def _play_overflow(replay, server: str, surface: str) -> None:
    """Queue the recorded overflow: the streamed request's empty answer and its probe's 400; a call
    not streamed is asked not streamed (issue 53 item 3), and the server's answer to the prompt not
    streamed is the probe's recorded 400 (recorded with `max_tokens` 1: its message says "1 in the
    completion")."""
    if "stream" not in surface:
        replay.play(server, "context_overflow_probe")
    else:
        replay.play(server, "context_overflow_stream", "context_overflow_probe")


@pytest.mark.parametrize("surface", SURFACES)
def test_recorded_llama_cpp_python_an_overflow_is_a_400_context_length_exceeded_everywhere_never_resent(funded, replay, surface):
    _play_overflow(replay, "llama-cpp-python-recorded", surface)

    named = _overflow_named(_call(funded, "llama-cpp-python-recorded", surface), surface)

    assert named["code"] == "context_length_exceeded"
    assert named["error"].startswith("context_length_exceeded: the prompt (3011 tokens) is over the model's context window of 2048 tokens")
    assert len(_full_requests(replay)) == 1  # asked once: no retry, no failover
    [stored] = stored_runs(funded)
    assert (stored.id, stored.status, stored.error) == (named["run"], "error", named["error"])


@pytest.mark.parametrize("surface", ["run+tools", "run stream", "chat round", "chat round stream+tools", "chat completions",
                                     "chat completions stream+tools"])
def test_recorded_litellm_an_overflow_is_a_400_context_length_exceeded_everywhere_never_resent(funded, replay, surface):
    _play_overflow(replay, "litellm-proxy-recorded", surface)

    named = _overflow_named(_call(funded, "litellm-proxy-recorded", surface), surface)

    assert named["code"] == "context_length_exceeded" and "context window of 2048 tokens" in named["error"]
    assert len(_full_requests(replay)) == 1


@pytest.mark.parametrize(("exchange", "asked", "window"), [("context_overflow_legacy", 5120, 4096), ("context_overflow", None, 4096)])
@pytest.mark.parametrize("surface", ["run", "run stream+tools", "chat round stream", "chat completions+tools", "chat completions stream"])
def test_vllm_an_overflow_in_either_error_shape_is_a_400_context_length_exceeded(funded, replay, surface, exchange, asked, window):
    replay.play("vllm", exchange)  # vLLM refuses before generating, streamed or not: no probe follows

    named = _overflow_named(_call(funded, "vllm", surface), surface)

    assert named["code"] == "context_length_exceeded" and named["error"].startswith("context_length_exceeded: the prompt")
    if asked:
        assert f"({asked} tokens) is over the model's context window of {window} tokens" in named["error"]
    assert len(replay.chat_requests) == 1
    assert inference.context_window("qwen2.5-0.5b") in (window, None)


# -- a gateway refusing the caller's field ---------------------------------------------------------


@pytest.mark.parametrize(("server", "exchange", "fields", "param"), [
    ("llama-cpp-python", "response_format_refused",  # llama-cpp-python 0.3.36: a validation 500 (the report)
     {"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}}, "response_format.type"),
    ("litellm-proxy", "field_refused",  # LiteLLM: a 400 whose error object names `param`
     {"response_format": {"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}}}}, "response_format"),
    ("vllm", "tool_choice_refused", {"tool_choice": "auto"}, "tool_choice"),  # vLLM: a 400 whose message names it
    ("vllm", "top_p_refused", {"top_p": 0}, "top_p"),
])
@pytest.mark.parametrize("stream", [False, True])
def test_a_gateway_refusing_a_field_the_caller_sent_is_the_callers_400_naming_it_asked_once(funded, replay, server, exchange, fields,
                                                                                            param, stream):
    replay.play(server, exchange)

    response = _call(funded, server, "chat completions stream" if stream else "chat completions", content="hi", **fields)

    assert response.status_code == 400 and not response.streaming, response.content  # streamed too: before any byte
    error = response.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "gateway_refused", param)
    assert error["message"].startswith(f"the model's gateway refused '{param}': upstream answered ")
    assert len(replay.chat_requests) == 1  # not retried (a 500 too), no failover
    [stored] = stored_runs(funded)
    assert (stored.id, stored.status, stored.attempts) == (error["run_id"], "error", 1)


def test_a_gateway_refusing_what_the_platform_composed_stays_a_502(funded, replay):
    replay.play("litellm-proxy-recorded", "unknown_model_stream")

    response = _call(funded, "litellm-proxy-recorded", "chat completions", content="hi", temperature=0.5)

    assert response.status_code == 502
    assert response.json()["error"]["code"] == "run_failed" and len(replay.chat_requests) == 1


@pytest.mark.parametrize(("body", "param"), [
    ({"error": {"message": "bad", "type": "invalid_request_error", "param": "tool_choice", "code": None}}, "tool_choice"),
    ({"object": "error", "message": "[{'type': 'x', 'loc': ('body', 'stop', 'str'), 'msg': 'Input should be a valid string'}]",
      "type": "BadRequestError", "param": None, "code": 400}, "stop.str"),
    ({"error": {"message": "Invalid model name", "type": "invalid_request_error", "param": None, "code": "400"}}, ""),
])
def test_classify_status_names_the_refused_field(body, param):
    failure = inference.classify_status(400, body)
    assert isinstance(failure, inference.UpstreamRefused) and failure.param == param
    assert (inference.refused_param(failure.reason) or (0, ""))[1] == param


# -- a completion asked not streamed (issue 53 item 3) fails as a streamed one does ----------------


def test_a_completion_not_streamed_fails_as_a_streamed_one_does(upstream, settings):
    from agents.execution.completion import CompletionFailed, complete
    from tests.support.upstream import Reply

    settings.AGENTS_RETRY_BASE_SECONDS, settings.AGENTS_RETRY_MAX_SECONDS = 0.001, 0.002
    settings.AGENTS_FAILOVER_MODEL = ""
    ask = {"models": ["test-model"], "messages": [{"role": "user", "content": "hi"}], "generation": {"stream": False}}

    upstream.script(Reply(empty=True), Reply(content="at last", prompt_tokens=4, completion_tokens=2))
    answered = complete(**ask)  # no choices: busy, retried
    assert (answered.attempts, answered.completion.choices[0].message.content) == (2, "at last")
    assert answered.completion.usage.prompt_tokens == 4 and "stream" not in upstream.chat_requests[-1]

    upstream.script(Reply(status=400, error_body={"error": {"message": "no", "type": "invalid_request_error", "param": "stop"}}))
    with pytest.raises(CompletionFailed) as refused:
        complete(**ask)
    assert refused.value.attempts == 1 and refused.value.reason == "upstream answered 400: stop: no"

    settings.AGENTS_MODEL_ATTEMPTS = 1
    upstream.script(Reply(content="late", delay=2))
    with pytest.raises(CompletionFailed) as late:
        complete(**ask, timeout=lambda: 0.3)
    assert late.value.reason.startswith("upstream timed out: the run's deadline passed")
