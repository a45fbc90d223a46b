"""Tools: names refused at create/patch, the tool loop, bounds, agents as tools, depth."""

from __future__ import annotations

import pytest

from agents.models import Agent
from runs.models import Run
from agents.tools.invoke import MAX_RESULT_BYTES, TOO_LARGE, TRUNCATED
from agents.tools.registry import resolve_tools
from tests.agents.conftest import debits, make_agent, run, stored_runs
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db


def tool_results(request: dict) -> list[str]:
    """Return the tool-result turns the run sent back to the model in one request."""
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def offered(request: dict) -> list[str]:
    """Return the function names offered in one request."""
    return [t["function"]["name"] for t in request.get("tools", [])]


# -- names refused at create and patch ---------------------------------------------------------

@pytest.mark.parametrize(
    ("tools", "message"),
    [
        (["teleport"], 'unknown tool "teleport": tools are current_time, calculator, http_get, agent_<name> or mcp__<server>__<tool>'),
        (["agent_ghost"], 'unknown tool "agent_ghost": the org has no agent named "ghost"'),
        (["agent_me"], 'tool "agent_me": an agent cannot call itself as a tool'),
        (["http_get"], 'tool "http_get" is off: this deployment does not let agents fetch web pages (its operator has allowed no web host)'),
        (["mcp__nowhere__x"], 'unknown tool "mcp__nowhere__x": no enabled MCP server "nowhere" in this org'),
        (["mcp__bad"], 'unknown tool "mcp__bad": MCP tools are named mcp__<server>__<tool>'),
    ],
)
def test_unknown_tool_names_are_refused_at_create(org_a, upstream, tools, message):
    response = org_a.client.post("/v1/agents", {"name": "me", "tools": tools}, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": message}
    with org_a.context():
        assert not Agent.objects.exists()


def test_unknown_tool_names_are_refused_at_patch_and_nothing_changes(org_a, upstream):
    make_agent(org_a, "keeper", tools=["calculator"])
    response = org_a.client.patch("/v1/agents/keeper", {"tools": ["calculator", "agent_keeper"]}, content_type="application/json")
    assert response.status_code == 400
    with org_a.context():
        assert Agent.objects.get(name="keeper").tools == ["calculator"]


def test_known_tools_are_accepted(org_a, upstream, settings):
    settings.AGENTS_TOOL_HTTP_ALLOW = ["example.com"]
    make_agent(org_a, "worker")
    view = make_agent(org_a, "boss", tools=["current_time", "calculator", "http_get", "agent_worker"])
    assert view["tools"] == ["current_time", "calculator", "http_get", "agent_worker"]


# -- the loop -----------------------------------------------------------------------------------

def test_two_round_tool_loop_feeds_results_back_and_answers(funded, upstream):
    make_agent(funded, "maths", tools=["calculator"])
    upstream.script(
        Reply(tool_calls=[("calculator", {"expression": "2+3"})]),
        Reply(tool_calls=[("calculator", {"expression": "5*4"})]),
        Reply(content="The answer is 20."),
    )

    response = run(funded, "maths", "compute (2+3)*4")

    assert response.status_code == 200
    body = response.json()
    assert (body["output"], body["toolCalls"], body["attempts"]) == ("The answer is 20.", 2, 3)
    assert body["promptTokens"] == 33 and body["completionTokens"] == 21  # summed over the 3 completions
    first, second, third = upstream.chat_requests
    assert offered(first) == offered(second) == ["calculator"]
    assert tool_results(second) == ["5"] and tool_results(third) == ["5", "20"]
    assistant = [m for m in third["messages"] if m["role"] == "assistant"]
    assert [m["tool_calls"][0]["function"]["name"] for m in assistant] == ["calculator", "calculator"]
    assert len(debits(funded)) == 1


def test_eight_rounds_at_most_and_the_last_is_offered_no_tools(funded, upstream):
    make_agent(funded, "looper", tools=["calculator"])
    upstream.script(*[Reply(tool_calls=[("calculator", {"expression": "1+1"})])] * 7, Reply(content="done"))

    body = run(funded, "looper").json()

    assert body["status"] == "ok" and body["toolCalls"] == 7
    requests = upstream.chat_requests
    assert len(requests) == 8
    assert all(offered(r) == ["calculator"] for r in requests[:7]) and "tools" not in requests[7]


def test_model_still_calling_tools_after_the_last_round_fails_the_run(funded, upstream, settings):
    settings.AGENTS_TOOL_ROUNDS = 2
    make_agent(funded, "stubborn", tools=["calculator"])
    upstream.script(*[Reply(tool_calls=[("calculator", {"expression": "1"})])] * 2)
    response = run(funded, "stubborn")
    assert response.status_code == 502
    assert response.json()["error"] == "the model asked for tools after its last tool round and gave no answer"
    assert debits(funded) == []


def test_tool_errors_bad_arguments_and_unknown_tools_go_back_to_the_model_as_text(funded, upstream):
    make_agent(funded, "careful", tools=["calculator", "current_time"])
    upstream.script(
        Reply(tool_calls=[
            ("calculator", {"expression": "1/0"}),
            ("calculator", {"expression": "1" * (33 * 1024)}),
            ("teleport", {}),
            ("current_time", {"timezone": "Mars/Olympus"}),
        ]),
        Reply(content="recovered"),
    )

    body = run(funded, "careful").json()

    assert body["status"] == "ok" and body["output"] == "recovered" and body["toolCalls"] == 4
    assert tool_results(upstream.chat_requests[1]) == [
        "error: division by zero",
        TOO_LARGE,
        "error: no tool named 'teleport' is offered to this agent",
        "error: 'Mars/Olympus' is not an IANA time zone",
    ]


def test_http_get_fetches_allowed_hosts_cut_at_16_kib(funded, upstream, settings):
    settings.AGENTS_TOOL_HTTP_ALLOW = ["127.0.0.1"]
    upstream.models = [f"model-{i:05d}-" + "x" * 40 for i in range(600)]  # a /models body well over 16 KiB
    make_agent(funded, "fetcher", tools=["http_get"], model="model-00000-" + "x" * 40)
    upstream.script(
        Reply(tool_calls=[("http_get", {"url": upstream.base_url + "/models"}), ("http_get", {"url": "http://example.com/"})]),
        Reply(content="fetched"),
    )

    assert run(funded, "fetcher").json()["status"] == "ok"

    fetched, refused = tool_results(upstream.chat_requests[1])
    assert fetched.startswith("HTTP 200\n{") and fetched.endswith(TRUNCATED)
    assert len(fetched[: -len(TRUNCATED)].encode()) <= MAX_RESULT_BYTES
    assert refused == "error: host 'example.com' is not on this deployment's allow-list"


def test_http_get_goes_through_the_outbound_door_and_follows_no_redirect(funded, upstream, settings, monkeypatch):
    """A named host is resolved once by toolkit.outbound and the connection goes to that answer."""
    from toolkit import outbound

    lookups: list[str] = []
    monkeypatch.setattr(outbound, "system_resolver", lambda host, port: lookups.append(host) or ["127.0.0.1"])
    port = upstream.base_url.split(":")[2].split("/")[0]
    settings.AGENTS_TOOL_HTTP_ALLOW = ["gateway.test"]
    make_agent(funded, "fetcher", tools=["http_get"])
    upstream.script(
        Reply(tool_calls=[("http_get", {"url": f"http://gateway.test:{port}/v1/models"}), ("http_get", {"url": "http://127.0.0.1/"})]),
        Reply(content="fetched"),
    )
    assert run(funded, "fetcher").json()["status"] == "ok"
    fetched, refused = tool_results(upstream.chat_requests[1])
    assert fetched.startswith("HTTP 200\n") and lookups == ["gateway.test"]
    assert refused == "error: host '127.0.0.1' is not on this deployment's allow-list"


def test_current_time_answers_in_the_asked_zone(funded, upstream):
    make_agent(funded, "clock", tools=["current_time"])
    upstream.script(Reply(tool_calls=[("current_time", {"timezone": "Asia/Tokyo"})]), Reply(content="ok"))
    run(funded, "clock")
    [answer] = tool_results(upstream.chat_requests[1])
    assert answer.endswith("+09:00 (Asia/Tokyo)")


# -- agents as tools ---------------------------------------------------------------------------

def test_agent_called_as_a_tool_is_a_nested_run_of_the_same_path(funded, upstream):
    make_agent(funded, "worker", description="does the work")
    make_agent(funded, "boss", tools=["agent_worker"])
    upstream.script(
        Reply(tool_calls=[("agent_worker", {"input": "do it"})]),
        Reply(content="done by worker"),
        Reply(content="boss: done"),
    )

    body = run(funded, "boss").json()

    assert body["status"] == "ok" and body["output"] == "boss: done" and body["toolCalls"] == 1
    first, nested, last = upstream.chat_requests
    assert first["tools"][0]["function"]["description"] == "does the work"
    assert nested["messages"] == [{"role": "user", "content": "do it"}] and "tools" not in nested
    assert tool_results(last) == ["done by worker"]
    worker_run = next(r for r in stored_runs(funded) if r.agent_name == "worker")
    assert (worker_run.depth, worker_run.parent_run_id, worker_run.actor, worker_run.output) == (1, body["id"], body["actor"], "done by worker")
    assert sorted(d.run_id for d in debits(funded)) == sorted([body["id"], worker_run.id])


def test_agent_tool_refused_by_the_gate_reaches_the_model_as_text(make_org, upstream):
    from tests.agents.conftest import fund

    org = make_org("thin")
    fund(org, 100)  # pays the outer run only
    make_agent(org, "worker")
    make_agent(org, "boss", tools=["agent_worker"])
    upstream.script(Reply(tool_calls=[("agent_worker", {"input": "x"})]), Reply(content="could not delegate"))

    body = run(org, "boss").json()

    assert body["status"] == "ok"
    assert tool_results(upstream.chat_requests[1]) == ["error: the org's balance cannot pay for this run; add credits"]
    assert [r.agent_name for r in stored_runs(org)] == ["boss"]


def test_nesting_stops_offering_tools_at_depth_three(funded, upstream):
    make_agent(funded, "d")
    make_agent(funded, "c", tools=["agent_d"])
    make_agent(funded, "b", tools=["agent_c"])
    with funded.context():
        Agent.objects.filter(name="d").update(tools=["agent_b", "calculator"])  # a loop back, stored directly
    make_agent(funded, "a", tools=["agent_b"])
    upstream.script(
        Reply(tool_calls=[("agent_b", {"input": "1"})]),
        Reply(tool_calls=[("agent_c", {"input": "2"})]),
        Reply(tool_calls=[("agent_d", {"input": "3"})]),
        Reply(content="d answers"),
        Reply(content="c answers"),
        Reply(content="b answers"),
        Reply(content="a answers"),
    )

    body = run(funded, "a").json()

    assert body["output"] == "a answers"
    requests = upstream.chat_requests
    assert [offered(r) for r in requests[:4]] == [["agent_b"], ["agent_c"], ["agent_d"], []]
    with funded.context():
        assert {r.agent_name: r.depth for r in Run.objects.all()} == {"a": 0, "b": 1, "c": 2, "d": 3}


def test_an_agent_is_never_offered_itself(funded, upstream):
    make_agent(funded, "narcissus", tools=["calculator"])
    with funded.context():
        Agent.objects.filter(name="narcissus").update(tools=["agent_narcissus", "calculator"])
        resolution = resolve_tools(["agent_narcissus", "calculator"], agent_name="narcissus", depth=0)
    assert [t.name for t in resolution.tools] == ["calculator"]
    assert resolution.not_offered == {"agent_narcissus": "an agent is never offered itself"}
    run(funded, "narcissus")
    assert offered(upstream.chat_requests[0]) == ["calculator"]


def test_agent_names_with_dots_get_valid_wire_names(funded, upstream):
    make_agent(funded, "v1.worker")
    make_agent(funded, "caller", tools=["agent_v1.worker"])
    upstream.script(Reply(tool_calls=[("agent_v1_worker", {"input": "hi"})]), Reply(content="nested"), Reply(content="outer"))
    body = run(funded, "caller").json()
    assert offered(upstream.chat_requests[0]) == ["agent_v1_worker"]
    assert body["output"] == "outer" and tool_results(upstream.chat_requests[2]) == ["nested"]
    assert upstream.chat_requests[0]["tools"][0]["function"]["parameters"]["required"] == ["input"]
