"""The agent loop against gateways as they behave (issue 31): messages strict servers accept,
deterministic refusals failed at once, honest finish reasons and usage, timeouts, the run id sent.

The loopback upstream (`tests/support/upstream.py`) plays the gateways' own behaviours; the
transcripts of real servers (written from their source and documentation, not recorded) are
replayed in `tests/agents/test_gateway_transcripts.py`.
"""

from __future__ import annotations

import pytest

from tests.agents.conftest import make_agent, run, run_streamed, stored_runs
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db

LLAMA_CPP_PYTHON_DUMP = (
    "7 validation errors for CreateChatCompletionRequest: [{'type': 'string_type', 'loc': ('body', 'messages', 2, "
    "'typed_dict', 'content'), 'msg': 'Input should be a valid string', 'input': None}, {'type': 'missing', 'loc': ('body', "
    "'messages', 2, 'typed_dict', 'name'), 'msg': 'Field required', 'input': {}}, {'type': 'x', 'loc': ('body', 'a'), "
    "'msg': 'm', 'input': 1}, {'type': 'x', 'loc': ('body', 'a'), 'msg': 'm', 'input': 1}, {'type': 'x', 'loc': ('body', 'a'), "
    "'msg': 'm', 'input': 1}, {'type': 'x', 'loc': ('body', 'a'), 'msg': 'm', 'input': 1}, {'type': 'x', 'loc': ('body', 'a'), "
    "'msg': 'm', 'input': 1}]"
)


def test_a_tool_round_sends_the_assistant_turn_with_empty_string_content_and_a_strict_server_accepts_it(funded, upstream):
    upstream.strict = True  # refuses `content: null` as llama-cpp-python does
    make_agent(funded, "calc", tools=["calculator"])
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "2+2"})]), Reply(content="four"))

    body = run(funded, "calc", "2+2?").json()

    assert (body["status"], body["output"], body["attempts"]) == ("ok", "four", 2)
    assistant = [m for m in upstream.chat_requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == "" and assistant[0]["tool_calls"][0]["function"]["name"] == "calculator"


@pytest.mark.parametrize("status,error_body", [
    (400, {"error": {"message": "bad prompt", "type": "invalid_request_error"}}),
    (422, {"detail": [{"loc": ["body", "messages", 0, "content"], "msg": "Input should be a valid string", "type": "string_type"}]}),
    (500, {"error": {"message": "unsupported value", "type": "invalid_request_error", "param": "tool_choice", "code": None}}),
    (500, {"error": {"message": LLAMA_CPP_PYTHON_DUMP, "type": "internal_server_error", "param": None, "code": None}}),
])
def test_a_deterministic_refusal_is_tried_once_and_named_in_one_sentence(funded, upstream, status, error_body):
    make_agent(funded, "once")
    upstream.script(*[Reply(status=status, error_body=error_body)] * 3, Reply(content="never reached"))

    response = run(funded, "once")

    body = response.json()
    assert response.status_code == 502 and body["status"] == "error" and body["attempts"] == 1
    assert len(upstream.chat_requests) == 1  # never retried
    assert body["error"].startswith(f"upstream answered {status}: ")
    assert "\n" not in body["error"] and len(body["error"]) < 300
    if error_body is not None and "validation" in str(error_body):
        assert body["error"] == ("upstream answered 500: messages.2.content: Input should be a valid string "
                                 "(and 6 more validation errors)")
    [stored] = stored_runs(funded)
    assert stored.error == body["error"]


def test_a_plain_500_is_still_retried(funded, upstream):
    make_agent(funded, "busy")
    upstream.script(Reply(status=500, error_body={"error": {"message": "out of memory", "type": "internal_server_error"}}),
                    Reply(content="fine"))
    body = run(funded, "busy").json()
    assert (body["status"], body["output"], body["attempts"]) == ("ok", "fine", 2)


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 2048 tokens. However, you requested 2066 tokens (2066 in the messages, 0 in the completion).",
    "Requested tokens (2066) exceed context window of 2048",
])
def test_a_context_overflow_is_a_clear_context_length_exceeded_error_tried_once(funded, upstream, message):
    make_agent(funded, "long")
    upstream.script(Reply(status=400, error_body={"error": {"message": message, "type": "invalid_request_error",
                                                            "code": "context_length_exceeded"}}))
    body = run(funded, "long").json()
    assert body["attempts"] == 1 and body["error"].startswith("context_length_exceeded: the prompt (2066 tokens)")
    assert "context window of 2048 tokens" in body["error"]


# -- honest outcomes (issue 31 item 3) --------------------------------------------------------


def test_a_reply_cut_by_the_token_limit_is_an_ok_run_recorded_with_finish_reason_length(funded, upstream):
    make_agent(funded, "short", maxTokens=5)
    upstream.script(Reply(content="Once upon a ti", finish="length"))

    response = run(funded, "short")

    body = response.json()
    assert response.status_code == 200 and (body["status"], body["output"], body["finishReason"]) == ("ok", "Once upon a ti", "length")
    [stored] = stored_runs(funded)
    assert (stored.status, stored.finish_reason, stored.truncated) == ("ok", "length", True)
    assert upstream.chat_requests[0]["max_tokens"] == 5


def test_a_content_filter_finish_passes_through_and_a_plain_answer_is_stop(funded, upstream):
    make_agent(funded, "filtered")
    upstream.script(Reply(content="I can't", finish="content_filter"), Reply(content="fine"))
    assert run(funded, "filtered").json()["finishReason"] == "content_filter"
    assert run(funded, "filtered").json()["finishReason"] == "stop"


def test_unknown_token_counts_stay_null_never_zero(funded, upstream):
    make_agent(funded, "quiet")
    upstream.script(Reply(content="no usage here", usage=False))

    body = run(funded, "quiet").json()

    assert (body["status"], body["promptTokens"], body["completionTokens"]) == ("ok", None, None)
    [stored] = stored_runs(funded)
    assert (stored.prompt_tokens, stored.completion_tokens) == (None, None)


# -- timeouts that fit slow models (issue 31 item 4) ------------------------------------------
# The first-token and between-tokens timeouts are a stream's: shown on streamed runs (a run without
# `stream` asks the gateway not streamed, bounded by the run's deadline: decision 1534).


@pytest.fixture
def one_attempt(settings):
    settings.AGENTS_MODEL_ATTEMPTS = 1
    return settings


def test_no_first_token_within_its_timeout_ends_the_run_saying_so(funded, upstream, one_attempt):
    one_attempt.INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS = 0.5
    make_agent(funded, "mute")
    upstream.script(Reply(content="late", first_chunk_delay=3))

    body = run_streamed(funded, "mute").json()

    assert body["status"] == "error"
    assert body["error"].startswith("upstream timed out: no first token within 0.5 s (INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS)")


def test_a_slow_first_token_is_waited_for_under_a_short_between_tokens_timeout(funded, upstream, one_attempt):
    one_attempt.INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS = 10
    one_attempt.INFERENCE_TOKEN_TIMEOUT_SECONDS = 0.3
    make_agent(funded, "thinker")
    upstream.script(Reply(content="at last", first_chunk_delay=0.8, chunks=["at", " last"]))

    body = run_streamed(funded, "thinker").json()

    assert (body["status"], body["output"]) == ("ok", "at last")


def test_a_stream_that_stalls_between_tokens_ends_at_the_between_tokens_timeout(funded, upstream, one_attempt):
    import threading

    one_attempt.INFERENCE_TOKEN_TIMEOUT_SECONDS = 0.5
    make_agent(funded, "staller")
    release = threading.Event()
    upstream.script(Reply(content="abcdef", chunk_size=2, pause_after=1, pause=release))
    try:
        body = run_streamed(funded, "staller").json()
    finally:
        release.set()

    assert body["status"] == "error" and "abcdef".startswith(body.get("output", ""))  # what was written is kept
    assert "no token for 0.5 s (INFERENCE_TOKEN_TIMEOUT_SECONDS)" in body["error"]


def test_the_run_deadline_bounds_a_reply_that_keeps_streaming(funded, upstream, one_attempt):
    one_attempt.AGENTS_RUN_DEADLINE_SECONDS = 1.0
    make_agent(funded, "chatty")
    upstream.script(Reply(content="abcdefghijklmnop", chunk_size=1, chunk_delay=0.2))

    body = run_streamed(funded, "chatty").json()

    assert body["status"] == "error" and "the run's deadline passed" in body["error"]
    assert "abcdefghijklmnop".startswith(body.get("output", "")) and len(body.get("output", "")) < 16


def test_the_deprecated_inference_timeout_still_bounds_one_completion(funded, upstream, one_attempt):
    one_attempt.INFERENCE_TIMEOUT_SECONDS = 1.0  # set by a deployment from before the timeouts were split
    make_agent(funded, "legacy")
    upstream.script(Reply(content="abcdefghijklmnop", chunk_size=1, chunk_delay=0.2))

    body = run_streamed(funded, "legacy").json()

    assert body["status"] == "error"
    assert body["error"].startswith("upstream timed out: the completion took over 1 s (INFERENCE_TIMEOUT_SECONDS)")
    assert "abcdefghijklmnop".startswith(body.get("output", "")) and len(body.get("output", "")) < 16


# -- the run id to the gateway (issue 32 item 5) -------------------------------------------------


def test_every_completion_of_a_run_carries_its_run_id_header(funded, upstream):
    make_agent(funded, "calc2", tools=["calculator"])
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "1+1"})]), Reply(content="2"))

    body = run(funded, "calc2").json()

    assert [h.get("x-agents-run-id") for h in upstream.request_headers] == [body["id"], body["id"]]
    assert all("metadata" not in r and "user" not in r for r in upstream.chat_requests)


# -- counting tokens and knowing the window (issue 31 item 2) ------------------------------------


def test_tokens_are_counted_by_llama_cpp_pythons_route_when_it_has_one(upstream):
    from agents import inference

    upstream.tokenizer = "llama-cpp-python"  # POST /extras/tokenize/count (no /tokenize)
    counts, how = inference.count_tokens("test-model", ["one two three", "four"])
    assert (counts, how) == ([3, 1], "tokenizer")
    assert [r["_path"] for r in upstream.requests if "tokenize" in r["_path"]][:2] == ["/tokenize", "/extras/tokenize/count"]


def test_without_a_tokenizer_counts_are_calibrated_from_usage_else_chars_over_three(upstream):
    from agents import inference

    assert inference.count_tokens("test-model", ["x" * 30]) == ([10], "estimate")
    inference.note_usage("test-model", prompt_bytes=100, prompt_tokens=50)  # this model: one token per 2 bytes
    assert inference.count_tokens("test-model", ["x" * 30]) == ([15], "calibrated")


def test_a_window_the_model_list_states_is_used_and_an_agents_own_is_capped_by_it(upstream, settings):
    from types import SimpleNamespace

    from agents import inference
    from agents.execution.context import window_for

    upstream.models = ["test-model"]
    upstream.model_extra = {"test-model": {"max_model_len": 4096}}  # vLLM's field
    assert inference.context_window("test-model") == 4096
    assert window_for(SimpleNamespace(context_window=None), "test-model") == 4096
    assert window_for(SimpleNamespace(context_window=8000), "test-model") == 4096
    assert window_for(SimpleNamespace(context_window=2048), "test-model") == 2048
    settings.AGENTS_CONTEXT_WINDOW_TOKENS = 1000
    assert window_for(SimpleNamespace(context_window=None), "other-model") == 1000
