"""The console's API keys page sets a key's limits (scope, allowed agents) and shows them."""

import re

from tenancy.models import ApiKey


def _new_key(response) -> str:
    return re.search(r'id="new-key" class="secret">(ak_[0-9a-f]{48})<', response.content.decode()).group(1)


def test_the_form_offers_the_scope_and_the_orgs_agents(org_a, admin_client, make_agent):
    make_agent(org_a, "writer")
    make_agent(org_a, "bot")
    html = admin_client.get("/console/keys/").content.decode()
    assert '<option value="openai"' in html and '<option value="all" selected' in html
    assert 'name="allowed_agents" value="bot"' in html and 'name="allowed_agents" value="writer"' in html


def test_creating_a_limited_key_stores_its_limits_and_lists_them(org_a, admin_client, make_agent):
    make_agent(org_a, "writer")
    make_agent(org_a, "bot")
    response = admin_client.post("/console/keys/", {"name": "editor", "scope": "openai", "allowed_agents": ["writer"]})
    assert response.status_code == 200
    key = _new_key(response)
    row = ApiKey.objects.get(prefix=key[:10])
    assert (row.name, row.scope, row.allowed_agents) == ("editor", "openai", ["writer"])
    html = admin_client.get("/console/keys/").content.decode()
    assert "OpenAI-compatible endpoint only: writer" in html.split(f'data-key="{row.prefix}"')[1].split("</tr>")[0]


def test_agents_on_a_key_of_scope_all_are_refused_with_the_services_words(org_a, admin_client, make_agent):
    make_agent(org_a, "writer")
    before = ApiKey.objects.count()
    response = admin_client.post("/console/keys/", {"name": "x", "scope": "all", "allowed_agents": ["writer"]})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="key-form-error"' in html and "allowed agents limit a key of scope &#x27;openai&#x27; or &#x27;mcp&#x27; only" in html
    assert 'id="new-key"' not in html and ApiKey.objects.count() == before


def test_an_agent_not_in_the_org_cannot_be_ticked(org_a, admin_client):
    before = ApiKey.objects.count()
    response = admin_client.post("/console/keys/", {"scope": "openai", "allowed_agents": ["ghost"]})
    assert response.status_code == 200 and 'id="new-key"' not in response.content.decode()
    assert ApiKey.objects.count() == before
