"""Stop means stop (issue 25): a stop interrupts the model call, the tool or the child run in
flight, not only the next step, and nothing of the interrupted step is recorded as completed.

Each test checks the cause and the order, never a duration: the fake gateway saw the client
close its stream before the last chunk, no second upstream request followed, and after the
stop's `control` event the session holds only the run's end (the partial reply as an
`incomplete` turn, written with the summary, then the summary). Timings live in bench/stop.py.
What a stop does to a streamed completion is shown on streamed runs (`run_streamed`); a run
without `stream` asks the gateway not streamed (decision 1534), and its stop cancels that request.
"""

from __future__ import annotations

import threading

import pytest

from tests.agents.conftest import debits, make_agent, run, run_streamed
from tests.runs.test_run_session import Steer, events, session_status
from tests.support.qcluster import wait_for
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

#: A 30 s streamed reply: 300 pieces, one every 0.1 s.
WORDS = "word " * 300


def long_reply() -> Reply:
    return Reply(content=WORDS, chunk_size=5, chunk_delay=0.1)


def after_stop(org, session_id: str) -> tuple[dict, list[dict]]:
    """Return the session's stop event and every event recorded after it."""
    recorded = events(org, session_id)
    [stop] = [e for e in recorded if e["kind"] == "control" and e["payload"]["command"] == "stop"]
    return stop, [e for e in recorded if e["seq"] > stop["seq"]]


def assert_only_the_end_after_the_stop(org, session_id: str, *, partial: str | None) -> None:
    """After the stop: the partial reply as an `incomplete` turn (when one was streamed), then the summary."""
    _, later = after_stop(org, session_id)
    expected = ([("message", True)] if partial else []) + [("log", None)]
    assert [(e["kind"], e["payload"].get("incomplete")) for e in later] == expected
    if partial:
        assert later[0]["payload"]["text"] == partial
    assert later[-1]["payload"]["status"] == "error" and "runId" in later[-1]["payload"]


def streaming(upstream, pieces: int = 3):
    """Wait until the upstream has sent `pieces` pieces of the first streamed reply."""
    wait_for(lambda: upstream.streams and upstream.streams[0].sent >= pieces, timeout=30, message="the reply to stream")


def closed_early(upstream) -> None:
    """The client closed the stream before its last chunk (the upstream's next write failed)."""
    wait_for(lambda: upstream.streams[0].client_closed or upstream.streams[0].finished, timeout=40, message="the stream to end")
    stream = upstream.streams[0]
    assert stream.client_closed and not stream.finished and stream.sent < stream.pieces


def test_a_stop_closes_the_streamed_completion_of_a_streamed_run_and_keeps_the_partial_reply_once(funded, upstream):
    make_agent(funded, "talker")
    upstream.script(long_reply())

    def script(sid, steer):
        streaming(upstream)
        steer.post(sid, "stop", message="enough")

    steer = Steer(funded, script)
    steer.start()
    response = run_streamed(funded, "talker")
    steer.finish()

    closed_early(upstream)
    assert len(upstream.chat_requests) == 1  # no retry, no failover after the stop
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "error" and body["error"] == f"stopped by {funded.slug}/{funded.user.username}: enough"
    assert body["finishReason"] == "stopped"
    assert body["output"] and WORDS.startswith(body["output"]) and len(body["output"]) < len(WORDS)
    assert_only_the_end_after_the_stop(funded, body["sessionId"], partial=body["output"])
    assert session_status(funded, body["sessionId"]) == "error"
    assert debits(funded) == []  # a stopped run stays unbilled
    # Its session and its activity row say it was a user's stop, not a failure (issue 57 item 4).
    assert funded.client.get(f"/v1/agents/sessions/{body['sessionId']}").json()["finishReason"] == "stopped"
    [row] = [r for r in funded.client.get("/v1/agents/activity").json()["activity"] if r["id"] == body["id"]]
    assert (row["kind"], row["finishReason"]) == ("failed", "stopped")
    listed = {s["id"]: s for s in funded.client.get("/v1/agents/sessions").json()["sessions"]}
    assert listed[body["sessionId"]]["finishReason"] == "stopped"


def test_a_stop_before_the_first_piece_cancels_the_request_and_records_no_reply(funded, upstream, settings):
    # A failover model is set: a request broken before its first piece is normally retried and
    # failed over, and a stop must start neither.
    settings.AGENTS_FAILOVER_MODEL = "best"
    make_agent(funded, "thinker")
    held = threading.Event()
    upstream.script(Reply(content=WORDS, chunk_size=5, chunk_delay=0.1, first_chunk_delay=30))

    def script(sid, steer):
        wait_for(lambda: upstream.streams, timeout=30, message="the request")
        steer.post(sid, "stop")

    steer = Steer(funded, script)
    steer.start()
    response = run_streamed(funded, "thinker")
    steer.finish()
    held.set()

    body = response.json()
    assert response.status_code == 200 and body["finishReason"] == "stopped" and not body.get("output")
    assert [r["model"] for r in upstream.chat_requests] == ["test-model"]  # no retry, no failover after the stop
    assert_only_the_end_after_the_stop(funded, body["sessionId"], partial=None)


def test_a_stop_cancels_the_request_of_a_run_asked_not_streamed_and_records_no_reply(funded, upstream, settings):
    settings.AGENTS_FAILOVER_MODEL = "best"
    make_agent(funded, "whole")
    gate = threading.Event()  # the upstream holds its whole answer until this is set (at most HOLD_SECONDS)
    upstream.script(Reply(content="the whole answer", hold=gate))

    def script(sid, steer):
        wait_for(lambda: upstream.chat_requests, timeout=30, message="the request")
        steer.post(sid, "stop")

    steer = Steer(funded, script)
    steer.start()
    response = run(funded, "whole")
    answered_while_held = not gate.is_set()
    steer.finish()
    gate.set()

    body = response.json()
    assert answered_while_held and response.status_code == 502  # the request was cancelled, not waited for
    assert body["finishReason"] == "stopped" and not body.get("output")
    assert "stream" not in upstream.chat_requests[0] and [r["model"] for r in upstream.chat_requests] == ["test-model"]
    assert_only_the_end_after_the_stop(funded, body["sessionId"], partial=None)
    assert debits(funded) == []


def _cluster_env(upstream) -> dict:
    return {"AGENTS_Q_WORKERS": "1", "AGENTS_RUN_LEASE_SECONDS": "2", "INFERENCE_BASE_URL": upstream.base_url,
            "INFERENCE_API_KEY": "test-key", "AGENTS_DEFAULT_MODEL": "test-model"}


def test_a_stop_reaches_a_background_run_streaming_in_a_qcluster_worker(funded, upstream):
    """`make run`'s defaults (ORM broker, an in-memory bus per process): the worker is another
    process, which reads the stop from the durable control log while the reply streams."""
    from tests.support.qcluster import QCluster

    make_agent(funded, "worker")
    upstream.script(long_reply())
    cluster = QCluster(_cluster_env(upstream), name="qcluster-stop").start()
    try:
        accepted = funded.client.post("/v1/agents/worker/run", {"input": "talk", "background": True}, content_type="application/json")
        assert accepted.status_code == 202
        run_id, sid = accepted.json()["runId"], accepted.json()["sessionId"]
        streaming(upstream)
        stopped = funded.client.post(f"/v1/agents/sessions/{sid}/stop", {}, content_type="application/json")
        wait_for(lambda: funded.client.get(f"/v1/agents/runs/{run_id}").json()["status"] == "error", timeout=40,
                 message=f"the stop\n{cluster.log()[-3000:]}")
        closed_early(upstream)
    finally:
        cluster.stop()

    assert stopped.status_code == 200
    view = funded.client.get(f"/v1/agents/runs/{run_id}").json()
    assert view["error"] == f"stopped by {funded.slug}/{funded.user.username}" and view["finishReason"] == "stopped"
    assert view["output"] and WORDS.startswith(view["output"])
    assert len(upstream.chat_requests) == 1
    assert_only_the_end_after_the_stop(funded, sid, partial=view["output"])
    assert debits(funded) == []


def test_an_agent_called_as_a_tool_stops_with_its_parent(funded, upstream):
    make_agent(funded, "child")
    make_agent(funded, "parent", tools=["agent_child"])
    upstream.script(Reply(tool_calls=[("agent_child", {"input": "talk"})]), long_reply())

    def script(sid, steer):
        wait_for(lambda: len(upstream.streams) >= 2 and upstream.streams[1].sent >= 3, timeout=30, message="the child's reply")
        steer.post(sid, "stop")

    steer = Steer(funded, script)
    steer.start()
    response = run_streamed(funded, "parent")
    steer.finish()

    assert response.status_code == 200 and response.json()["finishReason"] == "stopped"
    wait_for(lambda: upstream.streams[1].client_closed or upstream.streams[1].finished, timeout=40, message="the child's stream to end")
    assert upstream.streams[1].client_closed and not upstream.streams[1].finished
    assert len(upstream.chat_requests) == 2  # the parent never asked again
    from runs.models import Run

    with funded.context():
        child = Run.objects.get(parent_run_id=response.json()["id"])
    assert (child.status, child.finish_reason, child.error) == ("error", "stopped", "stopped with its parent run")
    assert WORDS.startswith(child.output) and child.output
    assert_only_the_end_after_the_stop(funded, response.json()["sessionId"], partial=None)  # no tool result in the parent
    assert debits(funded) == []


def test_pause_lets_the_reply_being_streamed_finish_and_holds_before_the_next_step(funded, upstream):
    """`pause` never interrupts: the streamed reply is read to its end and recorded; the run holds
    (session `paused`) before its next step until `resume`."""
    make_agent(funded, "pausable", tools=["calculator"])
    upstream.script(Reply(content="thinking " * 10, chunk_size=9, chunk_delay=0.1, tool_calls=[("calculator", {"expression": "1+1"})]),
                    Reply(content="two"))
    seen: dict = {}

    def script(sid, steer):
        streaming(upstream, 2)
        steer.post(sid, "pause")
        wait_for(lambda: session_status(funded, sid) == "paused", timeout=30, message="the pause")
        seen["requests while paused"] = len(upstream.chat_requests)
        seen["first stream"] = (upstream.streams[0].finished, upstream.streams[0].client_closed)
        steer.post(sid, "resume")

    steer = Steer(funded, script)
    steer.start()
    response = run_streamed(funded, "pausable")
    steer.finish()

    assert response.status_code == 200 and response.json()["output"] == "two" and response.json()["finishReason"] == "stop"
    assert seen == {"requests while paused": 1, "first stream": (True, False)}
    recorded = events(funded, response.json()["sessionId"])
    kinds = [(e["kind"], (e["payload"] or {}).get("text") or (e["payload"] or {}).get("command")) for e in recorded]
    pause_at = kinds.index(("control", "pause"))
    assert ("message", "thinking " * 10) in kinds[pause_at:]  # the reply streamed on and was recorded whole
    assert kinds.index(("log", "run paused")) < kinds.index(("control", "resume")) < kinds.index(("log", "run resumed"))
