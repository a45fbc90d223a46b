"""The retry and failover policy against the real loopback upstream (reference §3.5).

What a stream that breaks does is shown on streamed runs (`run_streamed`): a run without `stream`
asks the gateway not streamed (decision 1534)."""

from __future__ import annotations

import json
import socket
import socketserver
import threading

import pytest
from tenacity import RetryCallState

from agents.execution.completion import wait_equal_jitter
from agents.inference import drains_waiting, reset_caches
from tests.agents.conftest import debits, make_agent, run, run_streamed, stored_runs
from tests.support.qcluster import wait_for
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db


def _models(upstream) -> list[str]:
    return [r["model"] for r in upstream.chat_requests]


def test_busy_twice_then_ok_is_three_calls_and_one_debit(funded, upstream):
    make_agent(funded, "steady")
    upstream.script(Reply(status=429), Reply(status=503), Reply(content="third time"))

    response = run(funded, "steady")

    assert response.status_code == 200
    body = response.json()
    assert (body["output"], body["attempts"], body["model"]) == ("third time", 3, "test-model")
    assert _models(upstream) == ["test-model"] * 3
    assert [d.run_id for d in debits(funded)] == [body["id"]]


def test_empty_choices_are_retried(funded, upstream):
    make_agent(funded, "empty")
    upstream.script(Reply(empty=True), Reply(content="filled"))
    body = run(funded, "empty").json()
    assert (body["status"], body["output"], body["attempts"]) == ("ok", "filled", 2)


def test_primary_always_busy_fails_over_and_bills_the_failover_model(funded, upstream, settings):
    settings.AGENTS_FAILOVER_MODEL = "best"
    make_agent(funded, "fragile")
    upstream.script(*[Reply(status=500, model="test-model")] * 3, Reply(content="from best", model="best"))

    response = run(funded, "fragile")

    assert response.status_code == 200
    body = response.json()
    assert (body["output"], body["model"], body["attempts"]) == ("from best", "best", 4)
    assert _models(upstream) == ["test-model"] * 3 + ["best"]
    [debit] = debits(funded)
    assert (debit.run_id, debit.model) == (body["id"], "best")


def test_everything_busy_is_six_calls_502_and_no_debit(funded, upstream, settings):
    settings.AGENTS_FAILOVER_MODEL = "best"
    make_agent(funded, "doomed")
    upstream.script(*[Reply(status=429)] * 6)

    response = run(funded, "doomed")

    assert response.status_code == 502
    body = response.json()
    assert body["status"] == "error" and body["attempts"] == 6 and body["model"] == "best"
    assert body["error"].startswith("upstream answered 429") and "models tried: test-model, best" in body["error"]
    assert _models(upstream) == ["test-model"] * 3 + ["best"] * 3
    assert debits(funded) == []
    assert [r.status for r in stored_runs(funded)] == ["error"]


def test_failover_equal_to_the_primary_is_not_tried_twice(funded, upstream, settings):
    settings.AGENTS_FAILOVER_MODEL = "test-model"
    make_agent(funded, "same")
    upstream.script(*[Reply(status=500)] * 6)
    assert run(funded, "same").status_code == 502
    assert len(upstream.chat_requests) == 3


def test_a_400_fails_at_once_without_failover(funded, upstream, settings):
    settings.AGENTS_FAILOVER_MODEL = "best"
    make_agent(funded, "strict")
    upstream.script(Reply(status=400))

    response = run(funded, "strict")

    assert response.status_code == 502
    assert response.json()["attempts"] == 1 and response.json()["model"] == "test-model"
    assert _models(upstream) == ["test-model"]
    assert debits(funded) == []


def test_connection_errors_are_retried_then_the_run_fails(funded, upstream, settings):
    make_agent(funded, "lonely")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.INFERENCE_BASE_URL = f"http://127.0.0.1:{port}/v1"
    reset_caches()

    response = run(funded, "lonely")

    assert response.status_code == 502
    body = response.json()
    assert body["attempts"] == 3 and body["error"].startswith("upstream unreachable")
    assert debits(funded) == []


def test_once_failed_over_later_rounds_stay_on_the_failover_model(funded, upstream, settings):
    settings.AGENTS_FAILOVER_MODEL = "best"
    make_agent(funded, "sticky", tools=["calculator"])
    upstream.script(
        *[Reply(status=503, model="test-model")] * 3,
        Reply(tool_calls=[("calculator", {"expression": "1+1"})], model="best"),
        Reply(content="2", model="best"),
    )
    body = run(funded, "sticky").json()
    assert body["status"] == "ok" and body["model"] == "best"
    assert _models(upstream) == ["test-model"] * 3 + ["best", "best"]


@pytest.mark.parametrize(("attempt", "low", "high"), [(1, 0.075, 0.15), (2, 0.15, 0.3), (3, 0.3, 0.6), (6, 1.0, 2.0)])
def test_equal_jitter_waits_half_to_all_of_the_capped_delay(attempt, low, high):
    wait = wait_equal_jitter(base=0.15, cap=2.0)
    state = RetryCallState(retry_object=None, fn=None, args=(), kwargs={})
    state.attempt_number = attempt
    values = [wait(state) for _ in range(200)]
    assert all(low <= v <= high for v in values)
    assert max(values) - min(values) > (high - low) / 4  # jittered, not constant


# -- streaming: retries and failover only before the first delta has been sent (issue 12) --


@pytest.mark.django_db(transaction=True)  # a streamed run executes in a worker thread: its debit must see the committed org
def test_a_stream_that_breaks_before_any_delta_is_retried(funded, upstream):
    make_agent(funded, "early")
    upstream.script(Reply(content="never seen", chunk_size=3, fail_after=0), Reply(content="second try"))
    body = run_streamed(funded, "early").json()
    assert (body["status"], body["output"], body["attempts"]) == ("ok", "second try", 2)
    assert len(upstream.chat_requests) == 2 and len(debits(funded)) == 1


@pytest.mark.django_db(transaction=True)  # a streamed run executes in a worker thread: its debit must see the committed org
def test_text_held_back_but_never_sent_does_not_count_as_a_delta(funded, upstream):
    # "ghp_abc" could be the start of a credential: held back, so nothing reached the caller yet.
    make_agent(funded, "held")
    upstream.script(Reply(content="ghp_abcdefgh and more", chunks=["ghp_", "abcdefgh", " and more"], fail_after=2), Reply(content="clean"))
    body = run_streamed(funded, "held").json()
    assert (body["status"], body["output"], body["attempts"]) == ("ok", "clean", 2)


@pytest.mark.django_db(transaction=True)  # a streamed run executes in a worker thread: its debit must see the committed org
@pytest.mark.parametrize("fail_with", ["drop", "error"])
def test_a_stream_that_breaks_after_a_delta_ends_the_run_error_with_the_partial_output(funded, upstream, settings, fail_with):
    settings.AGENTS_FAILOVER_MODEL = "best"
    make_agent(funded, "late")
    upstream.script(Reply(content="The answer is forty two", chunks=["The ", "answer ", "is ", "forty ", "two"], fail_after=3, fail_with=fail_with))
    response = run_streamed(funded, "late")
    assert response.status_code == 200  # the stream had begun: its final frame is the failed run
    body = response.json()
    assert (body["status"], body["output"], body["attempts"]) == ("error", "The answer is ", 1)
    assert body["error"].startswith("the gateway failed while the reply was being written: ")
    assert _models(upstream) == ["test-model"]  # no retry, no failover
    assert debits(funded) == []
    (stored,) = stored_runs(funded)
    assert (stored.status, stored.output, stored.error) == ("error", "The answer is ", body["error"])
    with funded.context():
        from sessions.models import Event

        messages = [json.loads(e.payload) for e in Event.objects.filter(session_id=stored.session_id, kind="message")]
    assert messages[-1]["text"] == "The answer is " and messages[-1]["incomplete"] is True


@pytest.mark.django_db(transaction=True)  # a streamed run executes in a worker thread: its debit must see the committed org
def test_a_partial_credential_held_back_when_the_stream_breaks_is_not_recorded(funded, upstream):
    token_head = "ghp_" + "Zx9" * 6
    make_agent(funded, "cut")
    upstream.script(Reply(content=f"token {token_head}", chunks=["token ", token_head], fail_after=2))
    body = run_streamed(funded, "cut").json()
    assert (body["status"], body["output"]) == ("error", "token ")
    assert token_head not in json.dumps(body)
    (stored,) = stored_runs(funded)
    assert token_head not in stored.output


@pytest.mark.django_db(transaction=True)  # a streamed run executes in a worker thread: its debit must see the committed org
def test_streamed_completions_reuse_one_connection_to_the_gateway(funded, upstream):
    # The SDK closes a stream at its `[DONE]`, one chunk before the body ends; unless the rest is
    # read, the HTTP pool drops the connection and every completion opens (and handshakes) anew.
    reset_caches()
    make_agent(funded, "kept")
    for _ in range(3):
        assert run_streamed(funded, "kept").json()["status"] == "ok"
        wait_for(lambda: drains_waiting() == 0, timeout=10, message="the stream's body read to its end")
    assert len(upstream.chat_requests) == 3
    assert upstream.connections == 1


def test_the_gateway_client_keeps_the_environment_proxies(monkeypatch):
    from agents.inference import _GatewayHttpClient, _KeepAliveTransport

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    client = _GatewayHttpClient()
    try:
        assert [type(t) for t in client._mounts.values()] == [_KeepAliveTransport]
        assert isinstance(client._transport, _KeepAliveTransport) and client.follow_redirects
    finally:
        client.close()


class _SilentAfterDone(socketserver.BaseRequestHandler):
    """Answers one streamed completion up to its `[DONE]`, then neither ends the body nor closes."""

    release = threading.Event()

    def handle(self):
        self.request.recv(65536)
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "m",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}]}
        frames = [f"data: {json.dumps(chunk)}\n\n", "data: [DONE]\n\n"]
        body = "".join(f"{len(f):x}\r\n{f}\r\n" for f in frames)
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + body.encode())
        self.release.wait(30)


def test_a_gateway_silent_after_its_done_does_not_hold_the_run(settings):
    from agents.inference import chat_completion

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _SilentAfterDone)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _SilentAfterDone.release.clear()
    try:
        settings.INFERENCE_BASE_URL = f"http://127.0.0.1:{server.server_address[1]}/v1"
        reset_caches()
        answer = chat_completion(model="m", messages=[{"role": "user", "content": "hi"}])
        # The run has its answer while the gateway still holds the body open: the rest is
        # awaited on a drain thread, not on the run's.
        assert answer.choices[0].message.content == "done"
        assert drains_waiting() == 1
    finally:
        _SilentAfterDone.release.set()
        server.shutdown()
        server.server_close()
    wait_for(lambda: drains_waiting() == 0, timeout=10, message="the drain to give up on the closed connection")
    reset_caches()


def test_a_stream_closed_before_its_done_is_not_read_on():
    from agents.inference import _FinishingStream

    class Body:
        closed = False

        def __iter__(self):
            yield b'data: {"a": 1}\n\n'
            yield b'data: {"a": 2}\n\n'
            raise AssertionError("read on after the stream was closed")

        def close(self):
            Body.closed = True

    stream = _FinishingStream(Body())
    assert next(iter(stream)) == b'data: {"a": 1}\n\n'
    stream.close()
    assert Body.closed and drains_waiting() == 0


def test_a_stream_closed_at_its_done_is_read_to_its_end_then_closed():
    from agents.inference import _FinishingStream

    read = []

    class Body:
        closed = False

        def __iter__(self):
            yield b'data: {"a": 1}\n\n'
            yield b"data: [DONE]\n\n"
            read.append("end")  # the chunked body's last chunk: only then may HTTP reuse the connection

        def close(self):
            Body.closed = True

    stream = _FinishingStream(Body())
    chunks = iter(stream)
    assert [next(chunks), next(chunks)] == [b'data: {"a": 1}\n\n', b"data: [DONE]\n\n"]
    stream.close()
    wait_for(lambda: Body.closed, timeout=10, message="the drained body closed")
    assert read == ["end"]
    wait_for(lambda: drains_waiting() == 0, timeout=10, message="the drain counted done")


def test_a_body_that_does_not_end_after_its_done_is_closed_unread_past_the_limit():
    from agents.inference import DRAIN_LIMIT_CHUNKS, _FinishingStream

    read = []

    class Body:
        closed = False

        def __iter__(self):
            yield b"data: [DONE]\n\n"
            while True:  # a gateway that keeps writing after its [DONE]
                read.append(1)
                yield b": keep-alive\n\n"

        def close(self):
            Body.closed = True

    stream = _FinishingStream(Body())
    next(iter(stream))
    stream.close()
    wait_for(lambda: Body.closed, timeout=10, message="the body closed")
    assert len(read) == DRAIN_LIMIT_CHUNKS + 1
