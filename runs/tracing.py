"""OpenTelemetry for runs: `agent.run` → `agent.step` → `agent.tool` spans (reference §3.7).

One SDK `TracerProvider` per process, installed on first use unless the process already has an
SDK provider (e.g. from `opentelemetry-instrument`). Spans are exported over OTLP/HTTP to
`OTEL_EXPORTER_OTLP_ENDPOINT` (`…/v1/traces`) when it is set; without it they are still created,
so every run records a real trace id.
"""

from __future__ import annotations

import threading

from django.conf import settings
from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

TRACER_NAME = "agents.run"

# Span and attribute names (GenAI semantic conventions where one exists).
SPAN_RUN = "agent.run"
SPAN_STEP = "agent.step"
SPAN_TOOL = "agent.tool"
ATTR_RUN_ID = "agents.run_id"
ATTR_ORG = "agents.org"
ATTR_AGENT = "agents.agent"
ATTR_ACTOR = "agents.actor"
ATTR_DEPTH = "agents.depth"
ATTR_KIND = "agents.run_kind"
ATTR_TARGET_ID = "agents.target_id"
ATTR_STATUS = "agents.run_status"
ATTR_DURATION_MS = "agents.duration_ms"
ATTR_ATTEMPTS = "agents.model_attempts"
ATTR_FAILOVER = "agents.failover"
ATTR_TOOL_CALLS = "agents.tool_calls"
ATTR_ROUND = "agents.round"
ATTR_TOOLS_DECLARED = "agents.tools_declared"
ATTR_TOOLS_OFFERED = "agents.tools_offered"
ATTR_TOOL_SOURCE = "agents.tool_source"
ATTR_TOOL_FAILED = "agents.tool_failed"
ATTR_REQUEST_MODEL = "gen_ai.request.model"
ATTR_RESPONSE_MODEL = "gen_ai.response.model"
ATTR_INPUT_TOKENS = "gen_ai.usage.input_tokens"
ATTR_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
ATTR_TOOL_NAME = "gen_ai.tool.name"
EVENT_RETRY = "model retry"

_lock = threading.Lock()
_installed = False
_tracer: trace.Tracer | None = None  # the process's one tracer (the global provider is set once)


def build_provider(*, endpoint: str = "", service_name: str = "agents") -> TracerProvider:
    """Return a new SDK provider; with `endpoint` (the OTLP/HTTP base URL) it exports batches
    to `{endpoint}/v1/traces`."""
    provider = TracerProvider(resource=Resource.create({"service.name": service_name}))
    if endpoint:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    return provider


def _install() -> None:
    global _installed
    with _lock:
        if _installed:
            return
        if not isinstance(trace.get_tracer_provider(), TracerProvider):
            trace.set_tracer_provider(
                build_provider(endpoint=settings.OTEL_EXPORTER_OTLP_ENDPOINT, service_name=settings.OTEL_SERVICE_NAME)
            )
        _installed = True


def tracer() -> trace.Tracer:
    """Return the runs' tracer, installing the process's provider on first use.

    One tracer per process, made once: `get_tracer` builds a new one on every call (a scope
    object and a lock), and every request's span asks for it.
    """
    global _tracer
    if _tracer is None:
        if not _installed:
            _install()
        _tracer = trace.get_tracer(TRACER_NAME)
    return _tracer


def trace_id_hex(span: trace.Span) -> str:
    """Return `span`'s trace id as 32 hex characters ("" for a non-recording span)."""
    context = span.get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""


def error_status(message: str) -> trace.Status:
    """Return an ERROR span status carrying the first 200 characters of `message`."""
    return trace.Status(trace.StatusCode.ERROR, (message or "")[:200])
