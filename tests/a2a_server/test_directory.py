"""The org's public directory of A2A cards: off by default, listed and unlisted by an org admin,
read by anyone without a credential; only listed agents, only public fields."""

from __future__ import annotations

import httpx
import pytest

from a2a_server.models import PublicCard
from agents.models import McpServer
from tests.a2a_server.conftest import make_agent
from tests.identity.conftest import create_agent

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def directory(live, slug: str) -> httpx.Response:
    return httpx.get(f"{live.url}/v1/agents/a2a/public/{slug}", timeout=30)


def test_no_agent_is_public_until_an_admin_lists_it(live, org):
    assert directory(live, org.slug).json() == {"org": org.slug, "agents": []}
    assert org.client.get("/v1/agents/writer/a2a/public").json() == {"agent": "writer", "public": False, "url": None}
    assert httpx.get(f"{live.url}/v1/agents/a2a/public/{org.slug}/writer/.well-known/agent-card.json").status_code == 404

    listed = org.client.put("/v1/agents/writer/a2a/public")
    again = org.client.put("/v1/agents/writer/a2a/public")

    assert listed.status_code == 201 and again.status_code == 200
    url = listed.json()["url"]
    assert url.endswith(f"/v1/agents/a2a/public/{org.slug}/writer/.well-known/agent-card.json")
    card = httpx.get(f"{live.url}/v1/agents/a2a/public/{org.slug}/writer/.well-known/agent-card.json").json()
    assert card["name"] == "writer" and card["supportedInterfaces"][0]["url"] == f"{live.url}/v1/agents/writer/a2a"
    assert [c["name"] for c in directory(live, org.slug).json()["agents"]] == ["writer"]

    assert org.client.delete("/v1/agents/writer/a2a/public").status_code == 204
    assert directory(live, org.slug).json()["agents"] == []
    with org.context():
        assert PublicCard.objects.count() == 0


def test_the_public_card_keeps_internal_names_out(live, org):
    make_agent(org, "helper")
    with org.context():  # an MCP server the org registered (its tools are named, never called here)
        McpServer.objects.create(name="internal-db", transport="http", url="http://127.0.0.1:9/mcp")
    make_agent(org, "lead", description="Leads", tools=["calculator", "agent_helper", "mcp__internal-db__query"])
    member = org.client.get("/v1/agents/lead/a2a/.well-known/agent-card.json").json()
    org.client.put("/v1/agents/lead/a2a/public")

    public = httpx.get(f"{live.url}/v1/agents/a2a/public/{org.slug}/lead/.well-known/agent-card.json").json()

    assert [s["id"] for s in member["skills"]] == ["calculator", "agent_helper", "mcp__internal-db__query"]
    assert [s["id"] for s in public["skills"]] == ["calculator"]
    assert "internal-db" not in str(public) and "helper" not in str(public)
    assert set(public) == {"name", "description", "version", "provider", "supportedInterfaces", "capabilities",
                           "securitySchemes", "securityRequirements", "defaultInputModes", "defaultOutputModes", "skills"}


def test_only_an_admin_lists_and_an_unknown_org_is_404(live, org, make_org):
    member = make_org("a2m", admin=False)
    make_agent(member, "mine")

    refused = member.client.put("/v1/agents/mine/a2a/public")

    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert member.client.get("/v1/agents/mine/a2a/public").json()["public"] is False
    for slug in ("no-such-org", "Bad_Slug", org.slug + "x"):
        missing = directory(live, slug)
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    # Another org's agent cannot be listed from here: it is not in this org (404).
    assert org.client.put("/v1/agents/mine/a2a/public").status_code == 404


def test_an_identity_agent_is_not_listed_in_the_public_directory(live, org):
    created = create_agent(org.client, display_name="Echo", custom_id="echo_public").json()

    refused = org.client.put("/v1/agents/echo_public/a2a/public")

    assert refused.status_code == 409 and refused.json()["code"] == "agent_external"
    assert org.client.get("/v1/agents/echo_public/a2a/public").json()["public"] is False
    with org.context():
        assert PublicCard.objects.filter(agent_id=created["agent_id"]).count() == 0
    assert httpx.get(f"{live.url}/v1/agents/a2a/public/{org.slug}/echo_public/.well-known/agent-card.json").status_code == 404
