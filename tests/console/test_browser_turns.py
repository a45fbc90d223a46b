"""The console shows a session as a conversation, the agent form offers its tools as a picker,
the dashboard chart has a readable y-axis, and the site has an icon (real Chromium + live daphne)."""

import httpx
import pytest

from agents.models import Agent

pytestmark = pytest.mark.django_db(transaction=True)


def _api(server, org):
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=30)


def test_session_turns_read_as_a_conversation_with_tool_cards_and_readable_json(page, make_org, login, console_server, shoot):
    org = make_org("cv")
    api = _api(console_server, org)
    session = api.post("/v1/agents/sessions", json={"agent": "helper", "title": "Sum the invoices"}).json()
    turns = [
        {"kind": "message", "payload": {"role": "user", "text": "What is 17 + 25?"}},
        {"kind": "tool-call", "payload": {"name": "calculator", "arguments": {"expression": "17+25"}, "result": "42", "error": False}},
        {"kind": "message", "payload": {"role": "assistant", "text": "It is 42."}},
        {"kind": "status", "payload": {"phase": "done", "counts": {"files": 3}}},
    ]
    for turn in turns:
        assert api.post(f"/v1/agents/sessions/{session['id']}/events", json=turn).status_code == 201
    login(page, org)
    page.goto(f"/console/sessions/{session['id']}/")
    page.wait_for_selector("#events li[data-seq='4']")
    assert [page.get_attribute(f"#events li[data-seq='{n}']", "data-speaker") for n in (1, 2, 3, 4)] == ["user", "tool", "assistant", "status"]
    assert page.inner_text("#events li[data-seq='1'] .body .text") == "What is 17 + 25?"
    card = page.locator("#events li[data-seq='2'] .tool-card")
    assert card.locator(".tool-name code").inner_text() == "calculator"
    assert card.locator("pre.json").first.inner_text() == '{\n  "expression": "17+25"\n}'  # indented, not one raw line
    assert card.locator("pre.json").nth(1).inner_text() == "42"
    assert page.inner_text("#events li[data-seq='3'] .body .text") == "It is 42."
    status_json = page.inner_text("#events li[data-seq='4'] pre.json")
    assert '"phase": "done"' in status_json and "\n" in status_json
    shoot(page, "session-conversation")


def test_the_tool_picker_fills_the_tools_field_and_the_agent_is_saved_with_them(page, make_org, make_agent, login, shoot):
    org = make_org("tp")
    make_agent(org, "researcher", description="Looks things up")
    login(page, org)
    page.goto("/console/agents/new/")
    assert page.locator("#tool-picker input[data-tool='calculator']").count() == 1
    assert page.locator("#tool-picker input[data-tool='agent_researcher']").count() == 1
    page.fill("#id_name", "planner")
    page.check("#tool-picker input[data-tool='calculator']")
    page.check("#tool-picker input[data-tool='agent_researcher']")
    assert page.input_value("#id_tools") == "calculator\nagent_researcher"
    page.uncheck("#tool-picker input[data-tool='calculator']")
    assert page.input_value("#id_tools") == "agent_researcher"
    page.fill("#id_tools", "current_time")  # typing ticks the boxes that match
    page.dispatch_event("#id_tools", "input")
    assert page.is_checked("#tool-picker input[data-tool='current_time']")
    assert not page.is_checked("#tool-picker input[data-tool='agent_researcher']")
    page.check("#tool-picker input[data-tool='calculator']")
    shoot(page, "agent-form-tools")
    page.click("button:has-text('Create agent')")
    page.wait_for_url("**/console/agents/planner/")
    with org.context():
        assert Agent.objects.get(name="planner").tools == ["current_time", "calculator"]
    page.goto("/console/agents/planner/edit/")  # an agent is never offered itself
    assert page.locator("#tool-picker input[data-tool='agent_planner']").count() == 0
    assert page.is_checked("#tool-picker input[data-tool='calculator']")


def test_the_chart_has_a_labelled_y_axis_with_round_ticks(page, make_org, make_agent, login, console_server):
    org = make_org("ya")
    make_agent(org, "alpha")
    api = _api(console_server, org)
    for _ in range(7):
        assert api.post("/v1/agents/alpha/run", json={"input": "hi"}).status_code == 200
    login(page, org)
    page.wait_for_selector("#chart svg .y-axis")
    assert page.get_attribute("#chart svg .y-axis", "data-ticks") == "0,2,4,6,8"
    labels = page.locator("#chart svg .y-axis text").all_text_contents()
    assert labels == ["0", "2", "4", "6", "8", "runs"]


def test_the_site_has_an_icon(page, console_server):
    response = httpx.get(console_server.url + "/favicon.ico", follow_redirects=True, timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    page.goto("/console/login/")
    href = page.get_attribute("link[rel=icon]", "href")
    assert href.endswith("console/favicon.svg")
    assert httpx.get(console_server.url + href, timeout=30).status_code == 200
