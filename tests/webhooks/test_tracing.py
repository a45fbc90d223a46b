"""Traces (issue 32 item 6), read with the OTel SDK's in-memory exporter: a server span per
request (route template, status, org, no body) parenting the run's spans; a coding run's step
and tool spans (commands, commit, push); a webhook delivery's client span."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from runs import tracing
from coding.sandbox import get_sandbox
from tests.support.upstream import Reply
from tests.webhooks.conftest import create_endpoint, fund, make_agent, post
from tests.webhooks.test_run_finished import shop_remote  # noqa: F401  (fixture)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_delivery")]

_exporter = InMemorySpanExporter()


@pytest.fixture
def spans():
    """The spans this test ends, read from the process's real SDK provider."""
    tracing.tracer()
    provider = trace.get_tracer_provider()
    if not getattr(provider, "_webhooks_test_exporter", False):
        provider.add_span_processor(SimpleSpanProcessor(_exporter))
        provider._webhooks_test_exporter = True
    _exporter.clear()
    return _exporter


def _by_name(spans) -> dict[str, list]:
    found: dict[str, list] = {}
    for s in spans.get_finished_spans():
        found.setdefault(s.name, []).append(s)
    return found


def test_a_request_span_parents_the_runs_spans_and_a_delivery_is_a_client_span(org_a, receiver, upstream, spans):
    fund(org_a)
    make_agent(org_a, "traced", tools=["calculator"])
    endpoint = create_endpoint(org_a, receiver.url)
    receiver.secret = endpoint["secret"]
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "6*7"})]), Reply(content="42"))
    spans.clear()
    secret_input = "my private question"
    body = post(org_a.client, "/v1/agents/traced/run", {"input": secret_input}).json()
    found = _by_name(spans)
    [request] = found["POST /v1/agents/<ref>/run"]
    [root] = found["agent.run"]
    assert request.kind == SpanKind.SERVER and request.parent is None
    assert request.attributes["http.route"] == "/v1/agents/<ref>/run" and request.attributes["http.request.method"] == "POST"
    assert request.attributes["http.response.status_code"] == 200 and request.attributes["agents.org"] == org_a.slug
    assert secret_input not in str(dict(request.attributes)) and "traced" not in str(dict(request.attributes))  # no body, no path values
    assert root.parent.span_id == request.context.span_id and root.context.trace_id == request.context.trace_id
    assert format(request.context.trace_id, "032x") == body["traceId"]
    steps, [tool] = found["agent.step"], found["agent.tool"]
    assert all(s.parent.span_id == root.context.span_id for s in steps) and tool.parent.span_id == steps[0].context.span_id
    [delivery] = found["webhook.deliver"]
    assert delivery.kind == SpanKind.CLIENT and delivery.attributes["http.response.status_code"] == 204
    assert delivery.attributes["webhooks.event_type"] == "run.finished"
    assert endpoint["secret"] not in str(dict(delivery.attributes))


def test_an_error_answer_is_recorded_on_the_request_span(org_a, spans):
    spans.clear()
    assert org_a.client.get("/v1/agents/webhooks/whe_missing").status_code == 404
    [request] = _by_name(spans)["GET /v1/agents/webhooks/<webhook_id>"]
    assert request.attributes["http.response.status_code"] == 404 and request.attributes["agents.org"] == org_a.slug


@pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed (scripts/test-prereqs.sh)")
def test_a_coding_run_emits_step_and_tool_spans_for_commands_commit_and_push(org_a, upstream, shop_remote, spans):  # noqa: F811
    from tests.coding.conftest import execute, register, start

    fund(org_a, 10_000)
    assert register(org_a, shop_remote).status_code == 201
    upstream.script(
        Reply(content="Add notes", tool_calls=[("write_file", {"path": "NOTES.md", "content": "notes\n"})]),
        Reply(tool_calls=[("run", {"command": "cat NOTES.md"})]),
        Reply(tool_calls=[("finish", {"summary": "Added notes"})]),
    )
    started = start(org_a).json()
    spans.clear()
    assert execute(org_a, started["runId"]) == "ok"
    found = _by_name(spans)
    [root] = found["agent.run"]
    assert root.attributes["agents.run_id"] == started["runId"] and root.attributes["agents.run_kind"] == "coding"
    steps = found["agent.step"]
    assert [s.attributes["agents.round"] for s in steps] == [1, 2, 3] and all(s.parent.span_id == root.context.span_id for s in steps)
    tools = {s.attributes["gen_ai.tool.name"]: s for s in found["agent.tool"]}
    assert set(tools) == {"write_file", "run", "git.commit", "git.push"}
    assert tools["run"].parent.span_id == steps[1].context.span_id and tools["run"].attributes["agents.tool_failed"] is False
    commits = [s for s in found["agent.tool"] if s.attributes["gen_ai.tool.name"] == "git.commit"]
    assert commits[0].parent.span_id == steps[0].context.span_id  # the turn that wrote (a `run` turn may commit too)
    assert tools["git.push"].parent.span_id == root.context.span_id
