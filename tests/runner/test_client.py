"""The runner's HTTP client sorts every answer into Transient / ClaimRefused / Fatal (a real loopback server answers)."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from runner.client import ClaimRefused, Fatal, ServerClient, Transient


class Scripted(http.server.ThreadingHTTPServer):
    """Answers each request with the next (status, body) of `script`; records (method, path, body)."""

    def __init__(self):
        self.script: list[tuple[int, object]] = []
        self.seen: list[tuple[str, str, object]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                server.seen.append((self.command, self.path, json.loads(raw) if raw else None))
                status, body = server.script.pop(0) if server.script else (200, {})
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _answer

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture
def server():
    scripted = Scripted()
    yield scripted
    scripted.shutdown()
    scripted.server_close()


@pytest.fixture
async def client(server):
    api = ServerClient(server=f"http://127.0.0.1:{server.server_address[1]}/", api_key="ak_test", timeout=5)
    yield api
    await api.close()


async def test_answers_are_sorted_for_the_daemon(server, client):
    server.script = [(503, {"code": "busy", "error": "later"}), (429, "slow down"), (403, {"code": "forbidden", "error": "rotated"}),
                     (400, {"code": "invalid_request", "error": "bad"}), (403, {"code": "forbidden", "error": "no"})]
    with pytest.raises(Transient, match="503 busy: later"):
        await client.heartbeat(target_id="tgt_1", metrics={})
    with pytest.raises(Transient, match="429: slow down"):
        await client.register(label="l", kind="machine", host="h", spec={}, metrics={})
    with pytest.raises(ClaimRefused, match="rotated"):
        await client.claim(target_id="tgt_1", key="k")
    with pytest.raises(Fatal, match="400 invalid_request: bad"):
        await client.mint_key(target_id="tgt_1")
    with pytest.raises(ClaimRefused):
        await client.report(target_id="tgt_1", run_id="run_1", key="k", result={})


async def test_a_server_that_is_not_there_is_transient():
    from tests.support.live import free_port

    api = ServerClient(server=f"http://127.0.0.1:{free_port()}", api_key="k", timeout=2)
    try:
        with pytest.raises(Transient):
            await api.heartbeat(target_id="tgt_1", metrics={})
    finally:
        await api.close()


async def test_claims_and_reports(server, client):
    server.script = [(204, ""), (200, {"runId": "run_1"}), (200, {"delivered": True})]
    assert await client.claim(target_id="tgt_1", key="k") is None
    assert await client.claim(target_id="tgt_1", key="k") == {"runId": "run_1"}
    assert await client.report(target_id="tgt_1", run_id="run_1", key="k", result={"status": "ok"}) is True
    assert server.seen[-1] == ("POST", "/v1/agents/targets/tgt_1/runs/run_1/report", {"status": "ok"})


async def test_session_calls_are_best_effort(server, client):
    events = [{"kind": "log", "payload": {"text": "a"}}, {"kind": "log", "payload": {"text": "b"}}]
    server.script = [(400, {"code": "invalid_request", "error": "one is bad"}), (200, {"seq": 1}), (400, {"error": "bad"})]
    assert await client.append_events(session_id="sess_1", events=events) == [{"seq": 1}]  # the batch, then one by one
    assert [body for _, _, body in server.seen] == [{"events": events}, events[0], events[1]]
    server.script = [(500, "down")]
    assert await client.append_events(session_id="sess_1", events=events) is None
    server.script = [(500, "down"), (500, "down")]
    await client.set_session_status(session_id="sess_1", status="paused")  # logged, not raised
    assert await client.control(session_id="sess_1", after=4) == ([], 4)
    server.script = [(200, {"commands": [{"command": "stop"}], "cursor": 9})]
    assert await client.control(session_id="sess_1", after=4) == ([{"command": "stop"}], 9)
    assert await client.append_events(session_id="", events=events) is None and await client.append_event(session_id="", kind="log", payload={}) is None
    assert await client.control(session_id="", after=2) == ([], 2)
    await client.set_session_status(session_id="", status="running")
