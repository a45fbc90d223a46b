"""Agent names the API could not reach by name are refused (issue 11, item 6)."""

import pytest

from agents.models import Agent
from agents.names import ANNOUNCED, path_words, reserved_names


def _first_segments(client) -> set[str]:
    """The literal first segments after /v1/agents/ of the served OpenAPI paths (and the docs, the
    OpenAI-compatible endpoint, the A2A public directory and the MCP server: plain Django views outside the document)."""
    paths = client.get("/v1/agents/openapi.json").json()["paths"]
    words = {p.removeprefix("/v1/agents/").split("/")[0] for p in paths if p.startswith("/v1/agents/")}
    return {w for w in words if not w.startswith("{")} | {"docs", "openapi.json", "openai", "a2a", "mcp"}


def test_reserved_words_are_read_from_the_routes_served(client):
    assert path_words() == _first_segments(client)
    assert {"sessions", "targets", "metrics", "runs", "activity", "billing", "builds", "docs", "openapi.json"} <= path_words()
    assert reserved_names() == path_words() | ANNOUNCED
    assert ANNOUNCED == {"chat", "coding", "openai", "repos"}


@pytest.mark.parametrize("name", sorted(reserved_names()))
def test_an_agent_cannot_take_a_word_the_api_uses_as_a_path(org_a, name):
    response = org_a.client.post("/v1/agents", {"name": name}, content_type="application/json")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["error"] == f'name "{name}" is reserved: /v1/agents/{name} is a route of the API, so the agent could not be reached by name'
    with org_a.context():
        assert not Agent.objects.exists()


def test_a_name_only_resembling_a_path_word_is_an_ordinary_name(org_a):
    for name in ("Sessions", "runs2", "my-metrics", "chat.bot"):
        response = org_a.client.post("/v1/agents", {"name": name}, content_type="application/json")
        assert response.status_code == 201, response.content
        assert org_a.client.get(f"/v1/agents/{name}").json()["name"] == name


def test_the_document_lists_the_reserved_names_under_the_create_schema(client):
    name = client.get("/v1/agents/openapi.json").json()["components"]["schemas"]["AgentCreateIn"]["properties"]["name"]
    assert name["not"] == {"enum": sorted(reserved_names())}
