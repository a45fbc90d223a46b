"""MCP servers an org registers: tools listed, validated, called in a run (stdio and HTTP)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from agents.models import Agent, McpServer
from agents_site.vocabulary import McpTransport
from tests.agents.conftest import make_agent, run
from tests.support.live import free_port
from tests.support.upstream import Reply
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db

SERVER = Path(__file__).resolve().parents[1] / "support" / "mcp_server.py"


@pytest.fixture(autouse=True)
def loopback_mcp_allowed(settings):
    """The test servers listen on loopback, which only an allow-listed host may reach."""
    settings.AGENTS_MCP_ALLOW_HOSTS = ["127.0.0.1"]


@pytest.fixture(scope="module")
def mcp_http_url():
    """A real streamable-HTTP MCP server in its own process for this module."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        except OSError:
            assert proc.poll() is None, "the MCP server exited"
            return False
        return True

    wait_until(listening, timeout=60, interval=0.05, what=f"the MCP server to listen on {port}")
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(timeout=10)


def register_http(org, url: str, name: str = "remote") -> None:
    with org.context():
        McpServer.objects.create(name=name, transport=McpTransport.HTTP, url=url)


def register_stdio(org, name: str = "local") -> None:
    with org.context():
        McpServer.objects.create(name=name, transport=McpTransport.STDIO, command=sys.executable, args=[str(SERVER)])


def tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def test_http_mcp_tools_are_offered_called_and_their_errors_returned_as_text(funded, upstream, mcp_http_url):
    register_http(funded, mcp_http_url)
    make_agent(funded, "bridge", tools=["mcp__remote__add", "mcp__remote__fail"])
    upstream.script(
        Reply(tool_calls=[("mcp__remote__add", {"a": 2, "b": 40}), ("mcp__remote__fail", {"reason": "no luck"})]),
        Reply(content="42"),
    )

    body = run(funded, "bridge").json()

    assert body["status"] == "ok" and body["output"] == "42" and body["toolCalls"] == 2
    first = upstream.chat_requests[0]
    add = next(t["function"] for t in first["tools"] if t["function"]["name"] == "mcp__remote__add")
    assert add["description"] == "Add two integers." and add["parameters"]["required"] == ["a", "b"]
    added, failed = tool_results(upstream.chat_requests[1])
    assert added == "42"
    assert failed.startswith("error: ") and "no luck" in failed


def test_tool_a_registered_server_does_not_serve_is_refused(org_a, upstream, mcp_http_url):
    register_http(org_a, mcp_http_url)
    response = org_a.client.post("/v1/agents", {"name": "x", "tools": ["mcp__remote__teleport"]}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == 'unknown tool "mcp__remote__teleport": MCP server "remote" does not serve "teleport"'
    with org_a.context():
        assert not Agent.objects.exists()


def test_another_orgs_mcp_server_is_unknown(org_a, org_b, upstream, mcp_http_url):
    register_http(org_b, mcp_http_url)
    response = org_a.client.post("/v1/agents", {"name": "x", "tools": ["mcp__remote__add"]}, content_type="application/json")
    assert response.status_code == 400
    assert 'no enabled MCP server "remote"' in response.json()["error"]


def test_unreachable_server_is_accepted_at_create_and_not_offered_at_run(funded, upstream):
    register_http(funded, f"http://127.0.0.1:{free_port()}/mcp", name="down")
    make_agent(funded, "hopeful", tools=["mcp__down__add", "calculator"])
    assert run(funded, "hopeful").json()["status"] == "ok"
    assert [t["function"]["name"] for t in upstream.chat_requests[0]["tools"]] == ["calculator"]


def test_a_loopback_server_not_allow_listed_is_refused_before_any_request(funded, upstream, mcp_http_url, settings):
    settings.AGENTS_MCP_ALLOW_HOSTS = []
    register_http(funded, mcp_http_url)
    make_agent(funded, "inward", tools=["mcp__remote__add", "calculator"])
    body = run(funded, "inward").json()
    assert body["status"] == "ok"
    assert [t["function"]["name"] for t in upstream.chat_requests[0]["tools"]] == ["calculator"]
    from agents.tools.backends.mcp import McpUnavailable, list_server_tools

    with funded.context(), pytest.raises(McpUnavailable, match="refused destination: 127.0.0.1 is a loopback address"):
        list_server_tools(McpServer.objects.get(name="remote"), fresh=True)


def test_the_sdk_connects_through_the_outbound_door(funded, upstream, mcp_http_url, settings, monkeypatch):
    """A name is resolved by the outbound module once and the SDK's connection goes to that answer."""
    from toolkit import outbound

    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr(outbound, "system_resolver", resolver)
    settings.AGENTS_MCP_ALLOW_HOSTS = ["localhost"]  # the SDK's server accepts only a localhost Host header
    register_http(funded, mcp_http_url.replace("127.0.0.1", "localhost"), name="named")
    make_agent(funded, "named", tools=["mcp__named__add"])
    upstream.script(Reply(tool_calls=[("mcp__named__add", {"a": 1, "b": 2})]), Reply(content="3"))
    assert run(funded, "named").json()["output"] == "3"
    assert tool_results(upstream.chat_requests[1]) == ["3"] and set(lookups) == {"localhost"}
    settings.AGENTS_MCP_ALLOW_HOSTS = []  # the same name, no longer admitted, is refused
    from agents.tools.backends.mcp import McpUnavailable, list_server_tools

    with funded.context(), pytest.raises(McpUnavailable, match="refused destination: localhost is a loopback name"):
        list_server_tools(McpServer.objects.get(name="named"), fresh=True)


def test_stdio_servers_are_refused_while_off(org_a, upstream):
    register_stdio(org_a)
    response = org_a.client.post("/v1/agents", {"name": "x", "tools": ["mcp__local__add"]}, content_type="application/json")
    assert response.status_code == 400
    assert response.json()["error"] == 'tool "mcp__local__add": stdio MCP servers are off on this deployment (AGENTS_MCP_STDIO)'


def test_stdio_mcp_tool_runs_as_a_command_on_this_host(funded, upstream, settings):
    settings.AGENTS_MCP_STDIO = True
    register_stdio(funded)
    make_agent(funded, "local", tools=["mcp__local__shout"])
    upstream.script(Reply(tool_calls=[("mcp__local__shout", {"text": "quiet"})]), Reply(content="done"))

    assert run(funded, "local").json()["status"] == "ok"
    assert tool_results(upstream.chat_requests[1]) == ["QUIET"]


def test_only_org_admins_register_mcp_servers_in_the_admin(make_org):
    from django.test import Client

    admin_org = make_org("adm")
    member = make_org("mem", admin=False)
    form = {"name": "tools", "transport": "http", "command": "", "args": "[]", "url": "https://mcp.example.com/mcp", "enabled": "on"}

    refused = Client()
    refused.force_login(member.user)
    response = refused.post("/admin/agents/mcpserver/add/", form)
    assert response.status_code in (302, 403)
    with member.context():
        assert not McpServer.objects.exists()

    allowed = Client()
    allowed.force_login(admin_org.user)
    response = allowed.post("/admin/agents/mcpserver/add/", form)
    assert response.status_code == 302, response.content[:2000]
    with admin_org.context():
        server = McpServer.objects.get()
    assert (server.name, server.transport, server.url, server.id[:4]) == ("tools", "http", "https://mcp.example.com/mcp", "mcp_")


def test_admin_refuses_an_http_server_without_url(make_org):
    from django.test import Client

    org = make_org("adm")
    client = Client()
    client.force_login(org.user)
    response = client.post("/admin/agents/mcpserver/add/", {"name": "nourl", "transport": "http", "args": "[]", "url": ""})
    assert response.status_code == 200 and b"needs an http(s) URL" in response.content
    with org.context():
        assert not McpServer.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_stop_cancels_an_mcp_call_in_flight_and_records_no_result(funded, upstream, mcp_http_url, settings, tmp_path):
    """Issue 25: the call's task is cancelled (its HTTP request closed); no tool result follows the stop.
    The tool would answer only after 600 s and may take that long: the run ends because the call was cancelled."""
    settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS = 600
    from tests.runs.test_run_session import Steer
    from tests.agents.test_stop import assert_only_the_end_after_the_stop

    register_http(funded, mcp_http_url)
    make_agent(funded, "waiter", tools=["mcp__remote__wait"])
    began = tmp_path / "began"
    upstream.script(Reply(tool_calls=[("mcp__remote__wait", {"seconds": 600, "began": str(began)})]), Reply(content="never"))

    def script(sid, steer):
        # The server's tool writes its pid to `began` as it starts waiting: the call is in flight.
        wait_until(lambda: began.exists() and began.read_text(), timeout=60, what="the MCP call to begin")
        steer.post(sid, "stop")

    steer = Steer(funded, script)
    steer.start()
    response = run(funded, "waiter")
    steer.finish()

    assert response.status_code == 502 and response.json()["finishReason"] == "stopped"
    assert len(upstream.chat_requests) == 1
    assert_only_the_end_after_the_stop(funded, response.json()["sessionId"], partial=None)


@pytest.mark.django_db(transaction=True)
def test_a_stop_cancels_a_stdio_mcp_call_in_flight_and_ends_its_server_process(funded, upstream, settings, tmp_path):
    """Issue 25: a stdio MCP server's tool hangs (it would answer after 30 s); the stop posted while it
    waits cancels the call — the server's process is ended by the cancellation, not by the tool's
    answer — the run ends stopped with no tool result, and no second model request follows."""
    from tests.runs.test_run_session import Steer
    from tests.agents.test_stop import assert_only_the_end_after_the_stop
    from tests.toolkit.test_sandbox import processes, running

    settings.AGENTS_MCP_STDIO = True
    settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS = 600
    register_stdio(funded)
    make_agent(funded, "waiter", tools=["mcp__local__wait"])
    began = tmp_path / "began"
    upstream.script(Reply(tool_calls=[("mcp__local__wait", {"seconds": 30, "began": str(began)})]), Reply(content="never"))
    server: dict = {}

    def script(sid, steer):
        # The stdio server's tool is waiting: the call is in flight.
        wait_until(lambda: began.exists() and began.read_text(), timeout=60, what="the MCP call to begin")
        pid = int(began.read_text().split()[0])
        server.update(pid=pid, start=processes()[pid][3])
        steer.post(sid, "stop", message="enough")

    steer = Steer(funded, script)
    steer.start()
    response = run(funded, "waiter")
    steer.finish()

    assert [(command, status) for command, status, _ in steer.answers] == [("stop", 200)]
    assert response.status_code == 502 and response.json()["finishReason"] == "stopped"
    assert response.json()["error"] == f"stopped by {funded.slug}/{funded.user.username}: enough"
    # The call's server process is gone once the run has ended, and its tool never reached the end
    # of its wait: the stop ended it, not the tool's answer.
    assert not running(server["pid"], server["start"])
    assert began.read_text() == str(server["pid"])
    assert len(upstream.chat_requests) == 1
    assert_only_the_end_after_the_stop(funded, response.json()["sessionId"], partial=None)
