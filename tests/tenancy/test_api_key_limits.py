"""API key limits: a scope (`all` | `openai`) and the agents an `openai` key may use (issue 12 item 4)."""

import pytest
from django.core.management import call_command
from django.test import Client

from agents_site.errors import InvalidRequest
from tenancy.models import ApiKey
from tenancy.services import api_key_create


def _limited(org, *, agents=()):
    row, key = api_key_create(org=org.org, user=org.user, name="tool", scope="openai", allowed_agents=list(agents))
    return row, Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def test_a_new_key_may_call_everything_by_default(org_a):
    row = ApiKey.objects.get(org=org_a.org)
    assert (row.scope, row.allowed_agents) == ("all", [])
    assert org_a.client.get("/v1/agents").status_code == 200


def test_limits_are_stored_cleaned(org_a):
    row, _ = api_key_create(org=org_a.org, user=org_a.user, scope="openai", allowed_agents=[" writer ", "bot", "writer", ""])
    row.refresh_from_db()
    assert (row.scope, row.allowed_agents) == ("openai", ["writer", "bot"])


@pytest.mark.parametrize(
    "scope,agents,message",
    [
        ("everything", [], "scope must be one of: all, openai, mcp"),
        ("all", ["writer"], "allowed agents limit a key of scope 'openai' or 'mcp' only; choose one of them or name no agent"),
        ("openai", [7], "allowed agents must be agent names or ids (text)"),
        ("openai", ["x" * 129], "an allowed agent is at most 128 characters"),
        ("openai", [f"a{i}" for i in range(101)], "at most 100 allowed agents per key"),
    ],
)
def test_bad_limits_are_refused_and_no_key_is_minted(org_a, scope, agents, message):
    before = ApiKey.objects.count()
    with pytest.raises(InvalidRequest) as refused:
        api_key_create(org=org_a.org, user=org_a.user, scope=scope, allowed_agents=agents)
    assert refused.value.status == 400 and refused.value.message == message
    assert ApiKey.objects.count() == before


@pytest.mark.parametrize("path", ["/v1/agents", "/v1/agents/runs", "/v1/agents/sessions", "/v1/agents/openai",
                                  "/v1/agents/billing", "/v1/agents/sessions/stream", "/v1/identity/agents",
                                  "/v1/identity/inbox/stream"])
def test_an_openai_key_is_refused_on_every_other_api_path(org_a, path):
    _, client = _limited(org_a)
    response = client.get(path)
    assert response.status_code == 403
    body = response.json()
    assert body["code"] == "forbidden" and "limited to /v1/agents/openai/v1/" in (body.get("error") or body.get("detail", ""))


def test_an_openai_key_is_refused_on_writes_too_and_nothing_is_created(org_a):
    from agents.models import Agent

    _, client = _limited(org_a)
    response = client.post("/v1/agents", {"name": "sneaky"}, content_type="application/json")
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    with org_a.context():
        assert not Agent.objects.exists()


def test_an_openai_key_is_accepted_on_its_own_path(org_a):
    _, client = _limited(org_a)
    response = client.get("/v1/agents/openai/v1/models")
    assert response.status_code == 200 and response.json() == {"object": "list", "data": []}


def test_createapikey_sets_the_limits(org_a, capsys):
    call_command("createapikey", "--org", org_a.slug, "--user", org_a.user.username, "--scope", "openai",
                 "--agent", "writer", "--agent", "bot")
    key = capsys.readouterr().out.strip()
    row = ApiKey.objects.get(prefix=key[:10])
    assert (row.scope, row.allowed_agents) == ("openai", ["writer", "bot"])


def test_the_admin_shows_a_keys_limits(org_a):
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    api_key_create(org=org_a.org, user=org_a.user, name="tool", scope="openai", allowed_agents=["writer"])
    client = Client()
    client.force_login(admin)
    html = client.get("/admin/tenancy/apikey/").content.decode()
    assert "OpenAI-compatible endpoint only" in html and "writer" in html
