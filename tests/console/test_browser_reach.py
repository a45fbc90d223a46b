"""The agent page says how to reach the agent (issue 54 item 4): the API route, the OpenAI base URL,
the MCP server and the A2A card, each copyable, at 1280 and 390 px; an identity agent shows its card only."""

from __future__ import annotations

import pytest

from tests.console.test_browser_views import assert_fits
from tests.identity.conftest import create_agent

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_agent_page_shows_each_address_copyable_and_fits_a_phone(page, make_org, login, make_agent, console_server, shoot):
    org = make_org("reach")
    make_agent(org, "writer")
    login(page, org)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console_server.url)
    page.goto("/console/agents/writer/")
    shown = {key: page.inner_text(f"#reach-{key}") for key in ("api", "openai", "mcp", "a2a")}
    assert shown == {"api": f"{console_server.url}/v1/agents/writer/run", "openai": f"{console_server.url}/v1/agents/openai/v1",
                     "mcp": f"{console_server.url}/v1/agents/mcp",
                     "a2a": f"{console_server.url}/v1/agents/writer/a2a/.well-known/agent-card.json"}
    assert 'tool "writer"' in page.inner_text("[data-reach=mcp]") and 'model "writer"' in page.inner_text("[data-reach=openai]")
    page.click("[data-reach=mcp] button[data-copy]")
    page.wait_for_function("document.querySelector('[data-reach=mcp] button').textContent === 'Copied'")
    assert page.evaluate("navigator.clipboard.readText()") == shown["mcp"]
    shoot(page, "agent-reach")
    assert_fits(page, "/console/agents/writer/")
    assert page.is_visible("#reach-mcp") and page.is_visible("[data-reach=mcp] button[data-copy]")


def test_an_identity_agents_page_shows_its_card_only(page, make_org, login):
    org = make_org("reach-id")
    created = create_agent(org.client, display_name="Echo", custom_id="echo_reach_one").json()
    login(page, org)
    with org.context():
        from agents.models import Agent

        name = Agent.objects.get(pk=created["agent_id"]).name
    page.goto(f"/console/agents/{name}/")
    assert page.locator("#reach [data-reach]").evaluate_all("els => els.map(e => e.dataset.reach)") == ["a2a"]
