"""Spans agent.run → agent.step → agent.tool, and OTLP export to a real collector endpoint."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runs import tracing
from tests.agents.conftest import make_agent, run
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db

_exporter = InMemorySpanExporter()


@pytest.fixture
def spans():
    """The spans this test ends, read from the process's real SDK provider."""
    tracing.tracer()
    provider = trace.get_tracer_provider()
    if not getattr(provider, "_agents_test_exporter", False):
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        provider._agents_test_exporter = True
    _exporter.clear()
    return _exporter


def test_a_tool_run_emits_run_step_and_tool_spans(funded, upstream, spans):
    make_agent(funded, "traced", tools=["calculator"])
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "6*7"})]), Reply(content="42"))

    body = run(funded, "traced").json()

    finished = {s.name: [] for s in spans.get_finished_spans()}
    for s in spans.get_finished_spans():
        finished[s.name].append(s)
    [root], steps, [tool] = finished["agent.run"], finished["agent.step"], finished["agent.tool"]
    assert len(steps) == 2
    assert format(root.context.trace_id, "032x") == body["traceId"]
    assert all(s.parent.span_id == root.context.span_id for s in steps)
    assert tool.parent.span_id == steps[0].context.span_id
    assert root.attributes["agents.run_id"] == body["id"] and root.attributes["agents.org"] == funded.slug
    assert root.attributes["agents.agent"] == "traced" and root.attributes["agents.run_status"] == "ok"
    assert root.attributes["gen_ai.request.model"] == "test-model" and root.attributes["gen_ai.response.model"] == "test-model"
    assert root.attributes["gen_ai.usage.input_tokens"] == 22 and root.attributes["gen_ai.usage.output_tokens"] == 14
    assert root.attributes["agents.tool_calls"] == 1
    assert steps[0].attributes["agents.tools_offered"] == 1 and steps[0].attributes["agents.round"] == 1
    assert tool.attributes["gen_ai.tool.name"] == "calculator" and tool.attributes["agents.tool_failed"] is False


def test_retries_are_span_events_and_a_failed_run_is_an_error_span(funded, upstream, spans):
    make_agent(funded, "noisy")
    upstream.script(*[Reply(status=500)] * 3)

    body = run(funded, "noisy").json()

    [root] = [s for s in spans.get_finished_spans() if s.name == "agent.run"]
    [step] = [s for s in spans.get_finished_spans() if s.name == "agent.step"]
    assert root.status.status_code == trace.StatusCode.ERROR and root.attributes["agents.run_status"] == "error"
    assert [e.name for e in step.events] == ["model retry", "model retry"]
    assert step.events[0].attributes["agents.model_attempts"] == 1
    assert body["status"] == "error"


def test_a_gate_denial_is_an_error_span_with_no_step(make_org, upstream, spans):
    org = make_org("broke")
    make_agent(org, "denied")
    assert run(org, "denied").status_code == 402
    finished = [s for s in spans.get_finished_spans() if s.kind != trace.SpanKind.SERVER]  # not the requests' own spans
    assert [s.name for s in finished] == ["agent.run"]
    assert finished[0].status.status_code == trace.StatusCode.ERROR


def test_spans_are_exported_over_otlp_when_an_endpoint_is_set():
    received: list[bytes] = []

    class Collector(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append((self.path, body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        provider = tracing.build_provider(endpoint=f"http://127.0.0.1:{server.server_address[1]}", service_name="agents-test")
        with provider.get_tracer("t").start_as_current_span(tracing.SPAN_RUN, attributes={tracing.ATTR_RUN_ID: "run_x"}):
            pass
        assert provider.force_flush(5_000)
        provider.shutdown()
    finally:
        server.shutdown()
        server.server_close()
    [(path, body)] = received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    [span] = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert span.name == "agent.run"
    assert {a.key: a.value.string_value for a in span.attributes} == {"agents.run_id": "run_x"}
