"""The run path on a real daphne process: HTTP in, the loopback upstream, spans out over OTLP."""

from __future__ import annotations

import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.agents.conftest import debits, fund, stored_runs
from tests.runs.test_run_session import running_session, session_status
from tests.support.live import LiveServer
from tests.support.upstream import Reply

REDIS_URL = os.environ.get("AGENTS_TEST_REDIS_URL", "redis://127.0.0.1:6379/7")

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def collector():
    """A real OTLP/HTTP endpoint on loopback; yields (base url, spans received)."""
    spans: list = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.path == "/v1/traces":
                request = ExportTraceServiceRequest.FromString(body)
                spans.extend(s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", spans
    server.shutdown()
    server.server_close()


def test_a_run_on_daphne_is_recorded_billed_and_traced_over_otlp(make_org, upstream, collector):
    endpoint, spans = collector
    org = make_org("live")
    fund(org)
    server = LiveServer({
        "INFERENCE_BASE_URL": upstream.base_url,
        "AGENTS_DEFAULT_MODEL": "test-model",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_BSP_SCHEDULE_DELAY": "50",
    }).start()
    try:
        client = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=30)
        assert client.post("/v1/agents", json={"name": "live", "tools": ["calculator"]}).status_code == 201
        upstream.script(Reply(tool_calls=[("calculator", {"expression": "3*3"})]), Reply(content="nine"))

        response = client.post("/v1/agents/live/run", json={"input": "3 squared?"})

        assert response.status_code == 200
        body = response.json()
        assert body["status"] == "ok" and body["output"] == "nine" and body["toolCalls"] == 1
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and {"agent.run", "agent.step", "agent.tool"} - {s.name for s in spans}:
            time.sleep(0.05)
    finally:
        server.stop()
    names = sorted(s.name for s in spans if s.name.startswith("agent."))
    assert names == ["agent.run", "agent.step", "agent.step", "agent.tool"]
    [root] = [s for s in spans if s.name == "agent.run"]
    assert root.trace_id.hex() == body["traceId"]
    # The request's server span (issue 32 item 6: route template, no body) is the run's parent.
    [request_span] = [s for s in spans if s.span_id == root.parent_span_id]
    assert request_span.name.startswith("POST /v1/agents/") and request_span.name.endswith("/run") and "live" not in request_span.name
    assert {a.key: a.value.string_value for a in root.attributes if a.key == "agents.run_id"} == {"agents.run_id": body["id"]}
    assert [(r.id, r.status) for r in stored_runs(org)] == [(body["id"], "ok")]
    assert [d.run_id for d in debits(org)] == [body["id"]]


def test_a_stop_posted_to_another_process_reaches_the_executing_run(make_org, upstream):
    """Two daphne processes on one Redis channel layer: the run executes in A, the command is
    posted to B, B forwards it to A's executor inbox and answers `forwarded: true`."""
    org = make_org("xproc")
    fund(org)
    env = {"INFERENCE_BASE_URL": upstream.base_url, "AGENTS_DEFAULT_MODEL": "test-model", "REDIS_URL": REDIS_URL}
    a, b = LiveServer(env).start(), LiveServer(env).start()
    try:
        headers = {"Authorization": f"Bearer {org.key}"}
        client_a = httpx.Client(base_url=a.url, headers=headers, timeout=30)
        client_b = httpx.Client(base_url=b.url, headers=headers, timeout=30)
        created = client_a.post("/v1/agents", json={"name": "far"})
        assert created.status_code == 201, created.text
        slow = threading.Event()
        upstream.script(Reply(hold=slow, content="too late"))
        result: dict = {}
        runner = threading.Thread(target=lambda: result.update(response=client_a.post("/v1/agents/far/run", json={"input": "x"})))
        runner.start()
        sid = running_session(org)

        answer = client_b.post(f"/v1/agents/sessions/{sid}/stop", json={})
        slow.set()
        runner.join(30)
    finally:
        a.stop()
        b.stop()
    assert answer.status_code == 200 and answer.json()["forwarded"] is True and answer.json()["command"] == "stop"
    response = result["response"]
    assert response.status_code == 502
    assert response.json()["error"] == f"stopped by {org.slug}/{org.user.username}"
    assert session_status(org, sid) == "error"
    assert debits(org) == []
