"""Transcripts of llama-cpp-python's server and LiteLLM's proxy replayed against the agent,
tool, chat and OpenAI-compatible paths (issue 31 item 5).

The transcripts (`tests/support/transcripts/*.json`) say how they were made: both are WRITTEN
FROM THE SERVERS' SOURCE AND DOCUMENTATION, not recorded (see each file's `provenance`); the
real server is exercised by `make test-gateways` (scripts/test-gateways.sh).

A transcript's streamed answers are replayed to streamed calls: `run` below is `POST …/run` with
`stream: true` (a call without `stream` asks the gateway not streamed: decision 1534).
"""

from __future__ import annotations

import pytest

from agents import inference
from billing.services import credit_add
from tests.agents.conftest import make_agent, run_streamed, stored_runs
from tests.support.replay import Replay, transcript

pytestmark = pytest.mark.django_db(transaction=True)  # a streamed run executes in a worker thread: it must see the committed org


def run(org, ref: str, text: str = "hello"):
    """POST /v1/agents/{ref}/run with `stream: true` (the transcripts' answers are streamed ones)."""
    return run_streamed(org, ref, text)


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
    inference.reset_caches()
    yield replay_server
    inference.reset_caches()
    assert replay_server.unplayed == 0  # every exchange the test queued was asked for


def _agent(org, name: str, model: str, **fields) -> None:
    make_agent(org, name, model=model, **fields)


@pytest.mark.parametrize("server", ["llama-cpp-python", "litellm-proxy", "llama-cpp-python-recorded", "litellm-proxy-recorded", "vllm"])
def test_every_transcript_says_how_it_was_made(server):
    data = transcript(server)
    assert data["server"] and data["provenance"].startswith(("RECORDED", "WRITTEN FROM"))
    if data["provenance"].startswith("WRITTEN FROM"):
        assert "NOT RECORDED" in data["provenance"]  # never passed off as a recording


def test_the_local_models_guide_says_the_transcripts_are_written_not_recorded():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "local-models.md").read_text()
    written = [s for s in ("llama-cpp-python", "litellm-proxy") if transcript(s)["provenance"].startswith("WRITTEN FROM")]
    assert written == ["llama-cpp-python", "litellm-proxy"]  # a recorded one would change what the guide must say
    assert "are **written from the servers' source and documentation, not recorded**" in readme
    for recorded in ("llama-cpp-python-recorded", "litellm-proxy-recorded"):
        assert transcript(recorded)["provenance"].startswith("RECORDED")
        assert f"`{recorded}.json`" in readme


# -- llama-cpp-python ---------------------------------------------------------------------------


def test_llama_cpp_python_a_tool_round_trip_is_accepted(funded, replay):
    replay.play("llama-cpp-python", "tool_call_stream", "tool_result_answer")
    _agent(funded, "calc", "gemma-3-270m", tools=["calculator"])

    body = run(funded, "calc", "6*7?").json()

    assert (body["status"], body["output"], body["finishReason"]) == ("ok", "It is 42.", "stop")
    assistant = [m for m in replay.chat_requests[1]["messages"] if m["role"] == "assistant"][0]
    assert assistant["content"] == ""  # what this server's validation accepts (null is its 500 below)
    assert (body["promptTokens"], body["completionTokens"]) == (None, None)  # it streams no usage


def test_llama_cpp_python_a_validation_500_is_not_retried_and_named_in_one_sentence(funded, replay):
    replay.play("llama-cpp-python", "null_content_refused")
    _agent(funded, "strict", "gemma-3-270m")

    body = run(funded, "strict").json()

    assert body["attempts"] == 1 and len(replay.chat_requests) == 1
    assert body["error"] == ("upstream answered 500: messages.2.role: Input should be 'system' "
                             "(and 6 more validation errors)")


def test_llama_cpp_python_truncation_is_an_ok_run_with_finish_reason_length(funded, replay):
    replay.play("llama-cpp-python", "truncated_stream")
    _agent(funded, "short", "gemma-3-270m", maxTokens=5)
    body = run(funded, "short").json()
    assert (body["status"], body["output"], body["finishReason"]) == ("ok", "Once upon a time", "length")


def test_llama_cpp_python_a_context_overflow_in_a_broken_stream_is_named(funded, replay):
    replay.play("llama-cpp-python", "context_overflow_stream", "context_overflow_probe")
    _agent(funded, "long", "gemma-3-270m")

    body = run(funded, "long", "a very long prompt " * 100).json()

    assert body["status"] == "error" and body["attempts"] == 1
    assert body["error"].startswith("context_length_exceeded: the prompt (2067 tokens) is over the model's context window of 2048 tokens")
    assert [r.get("stream") for r in replay.chat_requests] == [True, None] and replay.chat_requests[1]["max_tokens"] == 1
    assert inference.context_window("gemma-3-270m") == 2048  # learned: the next round is trimmed to it


def test_llama_cpp_python_a_call_not_streamed_is_asked_not_streamed_and_has_its_usage(org_a, replay):
    from tests.openai_api.test_gateways import PATH

    replay.play("llama-cpp-python", "plain_answer")  # the server reports usage only when not streamed
    credit_add(org=org_a.org, cents=1000, actor="test")
    make_agent(org_a, "gem", model="gemma-3-270m")

    body = org_a.client.post(PATH, {"model": "gem", "messages": [{"role": "user", "content": "hi"}]},
                             content_type="application/json").json()

    assert body["choices"][0]["message"]["content"] == "Hi there!"
    assert body["usage"] == {"prompt_tokens": 10, "completion_tokens": 4, "total_tokens": 14}
    assert "stream" not in replay.chat_requests[0] and "stream_options" not in replay.chat_requests[0]
    [stored] = stored_runs(org_a)
    assert (stored.prompt_tokens, stored.completion_tokens) == (10, 4)


def test_llama_cpp_python_a_run_without_stream_is_asked_not_streamed_and_has_its_usage(funded, replay):
    replay.play("llama-cpp-python", "plain_answer")  # the server reports usage only when not streamed
    _agent(funded, "gem", "gemma-3-270m")

    body = funded.client.post("/v1/agents/gem/run", {"input": "hi"}, content_type="application/json").json()

    assert (body["status"], body["output"], body["promptTokens"], body["completionTokens"]) == ("ok", "Hi there!", 10, 4)
    assert "stream" not in replay.chat_requests[0] and "stream_options" not in replay.chat_requests[0]
    [stored] = stored_runs(funded)
    assert (stored.prompt_tokens, stored.completion_tokens) == (10, 4)


def test_llama_cpp_python_the_openai_path_streams_without_inventing_usage(org_a, replay):
    from tests.openai_api.test_gateways import PATH, _chunks

    replay.play("llama-cpp-python", "plain_stream_no_usage")
    credit_add(org=org_a.org, cents=1000, actor="test")
    make_agent(org_a, "gem", model="gemma-3-270m")

    response = org_a.client.post(PATH, {"model": "gem", "messages": [{"role": "user", "content": "hi"}], "stream": True,
                                        "stream_options": {"include_usage": True}}, content_type="application/json")

    chunks = _chunks(response)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == "Hi there!"
    assert all("usage" not in c for c in chunks) and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert replay.request_headers[-1]["x-agents-run-id"] == response["X-Agents-Run-Id"]


# -- llama-cpp-python, recorded from the real server (scripts/record-gateway-transcript.py) ---------


def _recorded(name: str) -> dict:
    return transcript("llama-cpp-python-recorded")["exchanges"][name]["response"]


def _recorded_text(name: str) -> str:
    return "".join(((p.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
                   for p in _recorded(name)["sse"] if isinstance(p, dict))


def test_recorded_a_plain_stream_is_an_ok_run_with_no_invented_usage(funded, replay):
    replay.play("llama-cpp-python-recorded", "plain_stream")
    _agent(funded, "gem", "gemma-3-270m", maxTokens=64)

    body = run(funded, "gem").json()

    assert (body["status"], body["output"]) == ("ok", _recorded_text("plain_stream"))
    assert body["finishReason"] == "length"  # the server cut the reply at max_tokens and said so
    assert (body["promptTokens"], body["completionTokens"]) == (None, None)  # it streams no usage, even when asked
    assert replay.chat_requests[0]["stream_options"] == {"include_usage": True}


def test_recorded_tools_offered_are_accepted_and_a_text_answer_ends_the_run(funded, replay):
    # With --chat_format gemma the server offers the model no function calling: it answers text.
    replay.play("llama-cpp-python-recorded", "tool_offered_stream")
    _agent(funded, "calc", "gemma-3-270m", tools=["calculator"], maxTokens=64)

    body = run(funded, "calc", "What is 6*7? Use the calculator.").json()

    assert (body["status"], body["output"]) == ("ok", _recorded_text("tool_offered_stream"))
    assert replay.chat_requests[0]["tools"][0]["function"]["name"] == "calculator"


def test_recorded_a_validation_500_is_not_retried_and_named_in_one_sentence(funded, replay):
    replay.play("llama-cpp-python-recorded", "null_content_refused")
    _agent(funded, "strict", "gemma-3-270m")

    body = run(funded, "strict").json()

    assert body["attempts"] == 1 and len(replay.chat_requests) == 1
    assert body["error"].startswith("upstream answered 500: messages.1.role: Input should be 'system'")
    assert "\n" not in body["error"] and "more validation errors" in body["error"]


def test_recorded_a_streamed_prompt_over_the_context_is_an_empty_200_and_is_named(funded, replay):
    # The real server does not break the stream (as the written transcript says): it answers 200
    # with an empty body. The one-token probe then names the overflow.
    assert _recorded("context_overflow_stream")["sse"] == [] and _recorded("context_overflow_stream")["end"] == "done"
    replay.play("llama-cpp-python-recorded", "context_overflow_stream", "context_overflow_probe")
    _agent(funded, "long", "gemma-3-270m")

    body = run(funded, "long", "word " * 3000).json()

    assert body["status"] == "error" and body["attempts"] == 1
    assert body["error"].startswith("context_length_exceeded: the prompt (3011 tokens) is over the model's context window of 2048 tokens")
    assert [r.get("stream") for r in replay.chat_requests] == [True, None] and replay.chat_requests[1]["max_tokens"] == 1
    assert inference.context_window("gemma-3-270m") == 2048


def test_recorded_truncation_passes_through_the_openai_path_without_usage(org_a, replay):
    from tests.openai_api.test_gateways import PATH, _chunks

    replay.play("llama-cpp-python-recorded", "truncated_stream")
    credit_add(org=org_a.org, cents=1000, actor="test")
    make_agent(org_a, "gem", model="gemma-3-270m")

    response = org_a.client.post(PATH, {"model": "gem", "messages": [{"role": "user", "content": "Write a long story about a cat."}],
                                        "stream": True, "max_tokens": 5, "stream_options": {"include_usage": True}},
                                 content_type="application/json")

    chunks = _chunks(response)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == _recorded_text("truncated_stream")
    assert all("usage" not in c for c in chunks) and chunks[-1]["choices"][0]["finish_reason"] == "length"


# -- LiteLLM's proxy ----------------------------------------------------------------------------


def test_litellm_a_tool_round_trip_with_usage_summed(funded, replay):
    replay.play("litellm-proxy", "tool_call_stream", "tool_result_answer")
    _agent(funded, "calc", "local-gemma", tools=["calculator"])

    body = run(funded, "calc", "6*7?").json()

    assert (body["status"], body["output"], body["promptTokens"], body["completionTokens"]) == ("ok", "It is 42.", 181, 17)
    assert [h["x-agents-run-id"] for h in replay.request_headers] == [body["id"]] * 2


def test_litellm_a_context_overflow_is_context_length_exceeded(funded, replay):
    replay.play("litellm-proxy", "context_overflow")
    _agent(funded, "long", "local-gemma")
    body = run(funded, "long").json()
    assert body["attempts"] == 1
    assert body["error"].startswith("context_length_exceeded: the prompt (9000 tokens) is over the model's context window of 8192 tokens")


def test_litellm_a_rate_limit_is_retried_then_answered(funded, replay):
    replay.play("litellm-proxy", "rate_limited", "stream_with_usage")
    _agent(funded, "busy", "local-gemma")
    body = run(funded, "busy").json()
    assert (body["status"], body["output"], body["attempts"], body["promptTokens"]) == ("ok", "Hello from LiteLLM", 2, 19)


def test_litellm_a_bad_request_is_not_retried(funded, replay):
    replay.play("litellm-proxy", "bad_request")
    _agent(funded, "bad", "local-gemma")
    body = run(funded, "bad").json()
    assert body["attempts"] == 1 and body["error"].startswith(
        "upstream answered 400: litellm.BadRequestError: OpenAIException - Invalid value for 'tool_choice'")
    assert "\n" not in body["error"]


def test_litellm_truncation_passes_through_the_openai_path(org_a, replay):
    from tests.openai_api.test_gateways import PATH

    replay.play("litellm-proxy", "truncated_answer")  # not streamed: asked of the gateway not streamed (issue 53)
    credit_add(org=org_a.org, cents=1000, actor="test")
    make_agent(org_a, "lite", model="local-gemma")

    body = org_a.client.post(PATH, {"model": "lite", "messages": [{"role": "user", "content": "story"}], "max_tokens": 3},
                             content_type="application/json").json()

    assert body["choices"][0]["finish_reason"] == "length" and body["choices"][0]["message"]["content"] == "Once upon a"
    assert body["usage"] == {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    [stored] = stored_runs(org_a)
    assert stored.finish_reason == "length"


# -- LiteLLM's proxy, recorded (1.108.7 in front of the recorded llama-cpp-python server) ---------


def _litellm(name: str) -> dict:
    return transcript("litellm-proxy-recorded")["exchanges"][name]["response"]


def _litellm_text(name: str) -> str:
    return "".join(((p.get("choices") or [{}])[0].get("delta") or {}).get("content") or ""
                   for p in _litellm(name)["sse"] if isinstance(p, dict))


def _litellm_usage(name: str) -> dict:
    return [p["usage"] for p in _litellm(name)["sse"] if isinstance(p, dict) and p.get("usage")][0]


def test_recorded_litellm_a_stream_with_usage_is_an_ok_run_with_its_counts(funded, replay):
    replay.play("litellm-proxy-recorded", "plain_stream")
    _agent(funded, "gem", "local-gemma", maxTokens=64)

    body = run(funded, "gem").json()

    usage = _litellm_usage("plain_stream")
    assert (body["status"], body["output"]) == ("ok", _litellm_text("plain_stream"))
    assert (body["promptTokens"], body["completionTokens"]) == (usage["prompt_tokens"], usage["completion_tokens"])


def test_recorded_litellm_an_overflow_it_turns_into_an_empty_stop_is_probed_and_named(funded, replay):
    # LiteLLM answers the backend's empty 200 as an empty reply with finish_reason "stop": taken as
    # it came, the run would be `ok` with no output. The probe gets the proxy's 400.
    assert _litellm_text("context_overflow_stream") == ""
    replay.play("litellm-proxy-recorded", "context_overflow_stream", "context_overflow_probe")
    _agent(funded, "long", "local-gemma")

    body = run(funded, "long", "word " * 3000).json()

    assert body["status"] == "error" and body["attempts"] == 1
    assert body["error"].startswith("context_length_exceeded: the prompt (3011 tokens) is over the model's context window of 2048 tokens")
    assert [r.get("stream") for r in replay.chat_requests] == [True, None]


def test_recorded_litellm_an_unknown_model_is_refused_once_in_one_sentence(funded, replay):
    replay.play("litellm-proxy-recorded", "unknown_model_stream")
    _agent(funded, "nope", "local-gemma")

    body = run(funded, "nope").json()

    assert body["attempts"] == 1 and len(replay.chat_requests) == 1
    assert body["error"].startswith("upstream answered 400: /chat/completions: Invalid model name passed in model=no-such-model")
    assert "\n" not in body["error"]


def test_recorded_litellm_truncation_passes_through_the_openai_path_with_its_usage(org_a, replay):
    from tests.openai_api.test_gateways import PATH, _chunks

    replay.play("litellm-proxy-recorded", "truncated_stream")
    credit_add(org=org_a.org, cents=1000, actor="test")
    make_agent(org_a, "gem", model="local-gemma")

    response = org_a.client.post(PATH, {"model": "gem", "messages": [{"role": "user", "content": "Write a long story about a cat."}],
                                        "stream": True, "max_tokens": 5, "stream_options": {"include_usage": True}},
                                 content_type="application/json")

    chunks = _chunks(response)
    usage = _litellm_usage("truncated_stream")
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == _litellm_text("truncated_stream")
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "length"
    assert [(c["usage"]["prompt_tokens"], c["usage"]["completion_tokens"]) for c in chunks if c.get("usage")] == [
        (usage["prompt_tokens"], usage["completion_tokens"])]
