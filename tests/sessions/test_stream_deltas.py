"""A run's reply being written, live, on a real daphne process (issue 12 item 2): the session
stream carries ephemeral `event: delta` frames (no id, never stored, never replayed) while the
gateway is still writing, and `stream: true` on the run route does the same for its caller."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from runs.models import Run
from sessions.models import Event
from tests.agents.conftest import fund
from tests.sessions.sse import Frame, open_stream
from tests.support.live import LiveServer
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = ["Hello ", "from a ", "streaming ", "model, ", "word by word."]


@pytest.fixture(scope="module")
def inference_daphne(django_db_setup, upstream_server):
    """One daphne process whose gateway is the loopback upstream."""
    server = LiveServer({
        "INFERENCE_BASE_URL": upstream_server.base_url, "INFERENCE_API_KEY": "k", "AGENTS_DEFAULT_MODEL": "test-model",
        "AGENTS_SSE_PING_SECONDS": "0.1", "AGENTS_SSE_CATCHUP_SECONDS": "0.3",
    }).start()
    yield server
    server.stop()


@pytest.fixture
def live_org(make_org, inference_daphne, upstream):
    org = make_org("live")
    fund(org)
    response = httpx.post(f"{inference_daphne.url}/v1/agents", json={"name": "writer"}, headers={"Authorization": f"Bearer {org.key}"}, timeout=30)
    assert response.status_code == 201, response.text
    return org


def _until(stream, predicate, *, limit: int = 500) -> list[Frame]:
    """Read frames (pings skipped) until one satisfies `predicate`; return them all."""
    frames = []
    for _ in range(limit):
        frame = stream.next_frame()
        assert frame is not None, "the stream ended early"
        if frame.comment is not None:
            continue
        frames.append(frame)
        if predicate(frame):
            return frames
    raise AssertionError(f"no such frame in {frames}")


def test_a_dashboard_watching_the_session_sees_the_reply_being_written(inference_daphne, live_org, upstream):
    release = threading.Event()
    upstream.script(Reply(content="".join(REPLY), chunks=REPLY, pause_after=2, pause=release))
    stream = open_stream(inference_daphne.url, live_org.key)
    answer: dict = {}

    def call() -> None:  # streamed: the gateway is asked streamed (a run without `stream` is asked not streamed, decision 1534)
        answer["response"] = httpx.post(f"{inference_daphne.url}/v1/agents/writer/run", json={"input": "say hello", "stream": True},
                                        headers={"Authorization": f"Bearer {live_org.key}"}, timeout=60)

    caller = threading.Thread(target=call)
    try:
        assert stream.next_frame().comment == "stream open"
        caller.start()
        early = _until(stream, lambda f: f.event == "delta")
        # The gateway is paused after two pieces: the run cannot have finished, yet the reply shows.
        assert not release.is_set() and "response" not in answer
        first = early[-1]
        assert first.id is None and set(first.data) == {"sessionId", "runId", "text"}
        assert first.data["text"] == "Hello "
        release.set()
        rest = _until(stream, lambda f: f.event == "event" and f.data["event"]["kind"] == "message" and f.data["event"]["payload"].get("role") == "assistant")
    finally:
        release.set()
        caller.join(60)
        stream.close()
    frames = early + rest
    deltas = [f for f in frames if f.event == "delta"]
    assert "".join(f.data["text"] for f in deltas) == "".join(REPLY)
    body = json.loads(answer["response"].text.rstrip().split("\n")[-1][len("data: "):])  # the final `run` frame
    assert answer["response"].status_code == 200 and body["output"] == "".join(REPLY)
    assert {(f.data["sessionId"], f.data["runId"]) for f in deltas} == {(body["sessionId"], body["id"])}
    assert rest[-1].data["event"]["payload"]["text"] == "".join(REPLY)  # the stored turn is the whole message
    with live_org.context():
        kinds = list(Event.objects.filter(session_id=body["sessionId"]).values_list("kind", flat=True))
        assert Run.objects.get().output == "".join(REPLY)
    assert "delta" not in kinds
    # A resumed stream replays the stored events only: deltas were ephemeral.
    resumed = open_stream(inference_daphne.url, live_org.key, headers={"Last-Event-ID": "0"})
    try:
        replay = _until(resumed, lambda f: f.event == "event" and f.data["event"]["kind"] == "message" and f.data["event"]["payload"].get("role") == "assistant")
    finally:
        resumed.close()
    assert all(f.event != "delta" for f in replay) and all(f.id is not None for f in replay if f.event == "event")


def test_a_streamed_run_answers_deltas_while_the_gateway_is_still_writing(inference_daphne, live_org, upstream):
    release = threading.Event()
    upstream.script(Reply(content="".join(REPLY), chunks=REPLY, pause_after=3, pause=release))
    client = httpx.Client(timeout=60)
    try:
        with client.stream("POST", f"{inference_daphne.url}/v1/agents/writer/run", json={"input": "say hello", "stream": True},
                           headers={"Authorization": f"Bearer {live_org.key}"}) as response:
            assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
            lines = response.iter_lines()
            seen = []
            for line in lines:
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if "".join(d.get("text", "") for d in seen) == "".join(REPLY[:3]):
                        break
            assert not release.is_set()  # three pieces arrived while the gateway still holds the rest
            release.set()
            events, datas, event = [], [], None
            for line in lines:
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: "):
                    events.append(event)
                    datas.append(json.loads(line[6:]))
    finally:
        release.set()
        client.close()
    assert events[-1] == "run" and datas[-1]["status"] == "ok" and datas[-1]["output"] == "".join(REPLY)
    assert "runId" in seen[0] and "text" not in seen[0]  # the stream opens with its `start` frame (issue 31)
    assert "".join(d["text"] for d in seen[1:] + datas[:-1]) == "".join(REPLY)
