"""`stream: true` on POST /v1/agents/{ref}/run: Server-Sent Events while the run executes
(delta and tool frames, one final `run` frame equal to the non-streamed answer); every refusal
stays an ordinary JSON answer before the stream."""

from __future__ import annotations

import asyncio
import json

import pytest

from runs.models import Run
from sessions.models import Event, Session
from tests.agents.conftest import debits, make_agent, stored_runs
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)  # the run executes in a worker thread: it must see the committed org


def post_run(org, ref: str, body: dict, **headers):
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    return org.client.post(f"/v1/agents/{ref}/run", json.dumps(body), content_type="application/json", **extra)


def frames_of(response) -> list[tuple[str | None, object]]:
    """Read a whole `text/event-stream` answer; return its frames as (event, decoded data)."""
    async def read() -> bytes:
        return b"".join([chunk if isinstance(chunk, bytes) else chunk.encode() async for chunk in response.streaming_content])

    text = asyncio.run(read()).decode()
    frames = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        event = next((line[7:] for line in lines if line.startswith("event: ")), None)
        data = next((line[6:] for line in lines if line.startswith("data: ")), None)
        assert not any(line.startswith("id:") for line in lines)
        frames.append((event, json.loads(data)))
    return frames


def test_a_streamed_run_sends_its_reply_in_delta_frames_then_the_recorded_run(funded, upstream):
    make_agent(funded, "talker")
    upstream.script(Reply(content="Hello there, streaming world!", chunks=["Hel", "lo there,", " stream", "ing wor", "ld!"]))
    response = post_run(funded, "talker", {"input": "hi", "stream": True})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream") and response["Cache-Control"] == "no-cache"
    frames = frames_of(response)
    deltas = [data["text"] for event, data in frames if event == "delta"]
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, streaming world!"
    event, final = frames[-1]
    assert event == "run" and [e for e, _ in frames].count("run") == 1
    (stored,) = stored_runs(funded)
    # It opens with `start` naming the run and its session, also said in headers (issue 31).
    assert frames[0] == ("start", {"runId": stored.id, "sessionId": stored.session_id})
    assert (response["X-Agents-Run-Id"], response["X-Agents-Session-Id"]) == (stored.id, stored.session_id)
    assert final == funded.client.get(f"/v1/agents/runs/{stored.id}").json()
    assert (final["status"], final["output"], final["promptTokens"], final["completionTokens"]) == ("ok", "Hello there, streaming world!", 11, 7)
    assert upstream.chat_requests[0]["stream"] is True and upstream.chat_requests[0]["stream_options"] == {"include_usage": True}
    assert len(debits(funded)) == 1


def test_the_final_frame_is_exactly_what_the_unstreamed_call_answers(funded, upstream):
    make_agent(funded, "twin")
    upstream.script(Reply(content="same answer", chunk_size=2), Reply(content="same answer"))
    streamed = frames_of(post_run(funded, "twin", {"input": "q", "stream": True}))[-1][1]
    plain = post_run(funded, "twin", {"input": "q", "stream": False}).json()
    different = {"id", "durationMs", "traceId", "sessionId", "startedAt", "createdAt"}
    assert {k: v for k, v in streamed.items() if k not in different} == {k: v for k, v in plain.items() if k not in different}
    assert set(streamed) == set(plain)


def test_tool_calls_stream_as_tool_frames(funded, upstream):
    make_agent(funded, "calc", tools=["calculator"])
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "6*7"})]), Reply(content="It is 42.", chunk_size=3))
    frames = frames_of(post_run(funded, "calc", {"input": "6*7?", "stream": True}))
    assert [e for e, _ in frames if e != "delta"] == ["start", "tool", "run"]
    tool = next(data for event, data in frames if event == "tool")
    assert tool == {"name": "calculator", "args": {"expression": "6*7"}, "result": "42"}
    assert "".join(d["text"] for e, d in frames if e == "delta") == "It is 42."
    assert frames[-1][1]["toolCalls"] == 1
    second = upstream.chat_requests[1]["messages"]
    assert second[-1]["role"] == "tool" and second[-2]["tool_calls"][0]["function"] == {"name": "calculator", "arguments": '{"expression": "6*7"}'}


def test_a_gateway_failure_after_the_first_delta_ends_the_run_error_with_what_was_written(funded, upstream):
    make_agent(funded, "flaky")
    upstream.script(Reply(content="first part of the answer and more", chunk_size=6, fail_after=3))
    frames = frames_of(post_run(funded, "flaky", {"input": "go", "stream": True}))
    written = "".join(d["text"] for e, d in frames if e == "delta")
    event, final = frames[-1]
    assert event == "run" and final["status"] == "error"
    assert written and "first part of the answer"[: len(written)] == written
    assert final["output"] == written and "while the reply was being written" in final["error"]
    assert final["attempts"] == 1 and len(upstream.chat_requests) == 1  # no retry once a delta went out
    assert debits(funded) == []  # a failed run is not debited


@pytest.mark.parametrize("bad", ["yes", 1, 0, "true", None.__class__.__name__, [True], {"on": True}])
def test_stream_must_be_a_json_boolean(funded, upstream, bad):
    make_agent(funded, "strict")
    response = post_run(funded, "strict", {"input": "x", "stream": bad})
    assert response.status_code == 400, response.content
    assert response.json()["status"] == 400
    assert stored_runs(funded) == [] and upstream.chat_requests == []


@pytest.mark.parametrize("extra", [{"background": True}, {"targetId": "tgt_" + "0" * 32}])
def test_stream_with_background_or_a_target_is_400(funded, upstream, extra):
    make_agent(funded, "both")
    response = post_run(funded, "both", {"input": "x", "stream": True, **extra})
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert "stream" in response.json()["error"]
    assert stored_runs(funded) == [] and upstream.chat_requests == []


def test_refusals_before_the_stream_are_plain_json(org_a, funded, upstream, settings):
    make_agent(funded, "gated")
    missing = post_run(funded, "nobody", {"input": "x", "stream": True})
    assert (missing.status_code, missing["Content-Type"], missing.json()["code"]) == (404, "application/json", "not_found")
    too_big = post_run(funded, "gated", {"input": "x" * (128 * 1024 + 1), "stream": True})
    assert too_big.status_code == 400 and too_big["Content-Type"] == "application/json"
    secret = post_run(funded, "gated", {"input": "use ghp_" + "a1B2" * 9, "stream": True})
    assert secret.status_code == 422 and secret.json()["code"] == "secret_in_transcript"
    settings.INFERENCE_BASE_URL = ""
    off = post_run(funded, "gated", {"input": "x", "stream": True})
    assert off.status_code == 503 and off.json()["code"] == "inference_unavailable"
    with funded.context():
        assert (Run.objects.count(), Session.objects.count(), Event.objects.count()) == (0, 0, 0)
    assert upstream.chat_requests == []


def test_an_org_without_credit_is_refused_402_before_the_stream(org_b, upstream):
    make_agent(org_b, "poor")
    response = post_run(org_b, "poor", {"input": "x", "stream": True})
    assert response.status_code == 402 and response.json()["code"] == "insufficient_balance"
    assert stored_runs(org_b) == [] and upstream.chat_requests == []


def test_a_replayed_idempotency_key_streams_the_recorded_run_once(funded, upstream):
    make_agent(funded, "once")
    upstream.script(Reply(content="only once"))
    first = frames_of(post_run(funded, "once", {"input": "x", "stream": True}, **{"Idempotency-Key": "k-1"}))
    again = post_run(funded, "once", {"input": "x", "stream": True}, **{"Idempotency-Key": "k-1"})
    assert again.status_code == 200 and again["Idempotent-Replayed"] == "true"
    assert frames_of(again) == [("start", {"runId": first[-1][1]["id"], "sessionId": first[-1][1]["sessionId"]}), ("run", first[-1][1])]
    assert len(upstream.chat_requests) == 1 and len(debits(funded)) == 1


def test_a_streamed_run_reports_only_the_usage_the_gateways_stream_gave(funded, upstream):
    make_agent(funded, "quiet")
    upstream.script(Reply(content="streamed without usage", chunk_size=6, usage=False))  # llama-cpp-python streams none

    event, final = frames_of(post_run(funded, "quiet", {"input": "hi", "stream": True}))[-1]

    assert upstream.chat_requests[0]["stream"] is True and upstream.chat_requests[0]["stream_options"] == {"include_usage": True}
    assert (event, final["status"], final.get("promptTokens"), final.get("completionTokens")) == ("run", "ok", None, None)
    [stored] = stored_runs(funded)
    assert (stored.prompt_tokens, stored.completion_tokens) == (None, None)  # never zeros, never an estimate
