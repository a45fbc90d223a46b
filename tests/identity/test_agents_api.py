"""POST/GET/PATCH/DELETE /v1/identity/agents: field rules, quota, rate limit, tenancy (spec 001)."""

from __future__ import annotations

import pytest
from django.test import Client

from agents.models import Agent
from identity.models import AgentCredential, IdentityProfile
from tests.identity.conftest import create_agent, patch, post

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def _count(org) -> int:
    with org.context():
        return IdentityProfile.objects.count()


def test_create_answers_201_with_token_once_and_an_external_agent(org_a):
    response = create_agent(org_a.client, display_name="Weather Bot", custom_id="weather_bot", bio="Forecasts", category="bot",
                            avatar_url="https://cdn.example.com/a.png")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["agent_token"].startswith(f"agt_{org_a.slug}_")
    assert body["custom_id"] == "weather_bot" and body["display_name"] == "Weather Bot"
    assert body["hosting"] == "external" and body["category"] == "bot"
    with org_a.context():
        agent = Agent.objects.get(pk=body["agent_id"])
        assert agent.name == "weather_bot" and agent.hosting == "external"
    listed = org_a.client.get("/v1/identity/agents").json()["agents"]
    assert [a["agent_id"] for a in listed] == [body["agent_id"]]
    assert "agent_token" not in listed[0]
    assert org_a.client.get(f"/v1/identity/agents/{body['agent_id']}").json()["custom_id"] == "weather_bot"
    # /v1/agents shows it with its hosting
    views = {a["name"]: a for a in org_a.client.get("/v1/agents").json()["agents"]}
    assert views["weather_bot"]["hosting"] == "external"


def test_create_without_custom_id_generates_a_name(org_a):
    body = create_agent(org_a.client).json()
    assert body["custom_id"].startswith("ext_")


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"display_name": "H"}, "display_name"),
        ({"display_name": "x" * 33}, "display_name"),
        ({"custom_id": "abc"}, "custom_id"),
        ({"custom_id": "Has_Upper"}, "custom_id"),
        ({"custom_id": "a" * 31}, "custom_id"),
        ({"custom_id": "with-dash"}, "custom_id"),
        ({"custom_id": "_leading"}, "custom_id"),
        ({"custom_id": "system_bot"}, "custom_id"),
        ({"custom_id": "hashee1"}, "custom_id"),
        ({"custom_id": "admin_x"}, "custom_id"),
        ({"custom_id": "official_x"}, "custom_id"),
        ({"bio": "b" * 501}, "bio"),
        ({"category": "robot"}, "category"),
        ({"connection_mode": "smoke"}, "connection_mode"),
        ({"connection_mode": None}, "connection_mode"),
        ({"connection_mode": "webhook"}, "webhook_url"),
        ({"connection_mode": "webhook", "webhook_url": "http://hooks.example.com/x"}, "webhook_url"),
        ({"connection_mode": "webhook", "webhook_url": "https://127.0.0.1/x"}, "webhook_url"),
        ({"connection_mode": "webhook", "webhook_url": "https://10.1.2.3/x"}, "webhook_url"),
        ({"connection_mode": "webhook", "webhook_url": "https://localhost/x"}, "webhook_url"),
        ({"connection_mode": "webhook", "webhook_url": "https://[::1]/x"}, "webhook_url"),
        ({"connection_mode": "webhook", "webhook_url": "ftp://example.com/x"}, "webhook_url"),
        ({"health_check_url": "https://192.168.0.1/health"}, "health_check_url"),
        ({"avatar_url": "http://cdn.example.com/a.png"}, "avatar_url"),
        ({"agent_token": "agt_x"}, "agent_token"),
    ],
)
def test_field_rules_answer_400_and_store_nothing(org_a, fields, field):
    response = create_agent(org_a.client, **fields)
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "invalid_request" and body["status"] == 400
    assert field in body["error"] or any(f["field"] == field for f in body.get("fields", []))
    assert _count(org_a) == 0


def test_body_that_is_not_an_object_is_400(org_a):
    response = org_a.client.post("/v1/identity/agents", "[1]", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    response = org_a.client.post("/v1/identity/agents", "{nope", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"


def test_webhook_to_an_allow_listed_loopback_host_may_use_http(org_a, settings):
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    response = create_agent(org_a.client, connection_mode="webhook", webhook_url="http://127.0.0.1:8123/hook")
    assert response.status_code == 201, response.json()
    assert response.json()["webhook_url"] == "http://127.0.0.1:8123/hook"


def test_custom_id_is_unique_in_the_org(org_a, make_org):
    assert create_agent(org_a.client, custom_id="unique_one").status_code == 201
    again = create_agent(org_a.client, custom_id="unique_one")
    assert again.status_code == 409 and again.json()["code"] == "agent_exists"
    other = make_org("c")
    assert create_agent(other.client, custom_id="unique_one").status_code == 201  # another org's store
    assert _count(org_a) == 1


def test_quota_answers_409_agent_limit_exceeded_with_agt_008(org_a, settings):
    settings.AGENTS_IDENTITY_QUOTA = 2
    assert create_agent(org_a.client).status_code == 201
    assert create_agent(org_a.client).status_code == 201
    response = create_agent(org_a.client)
    assert response.status_code == 409
    assert response.json() == {
        "status": 409,
        "code": "agent_limit_exceeded",
        "error": response.json()["error"],
        "error_code": "AGT_008",
        "limit": 2,
    }
    assert _count(org_a) == 2
    with org_a.context():
        assert AgentCredential.objects.count() == 2


def test_quota_is_per_creating_user(org_a, settings):
    from tenancy.services import api_key_create, membership_set

    settings.AGENTS_IDENTITY_QUOTA = 1
    assert create_agent(org_a.client).status_code == 201
    member = membership_set(org=org_a.org, username="second-user", password="pw", is_admin=False)
    _, key = api_key_create(org=org_a.org, user=member.user)
    assert create_agent(Client(HTTP_AUTHORIZATION=f"Bearer {key}")).status_code == 201
    assert create_agent(org_a.client).status_code == 409


def test_create_is_rate_limited_per_user(org_a, settings):
    from django.core.cache import cache

    cache.clear()
    settings.AGENTS_IDENTITY_CREATE_RATE = "2/min"
    assert create_agent(org_a.client).status_code == 201
    assert create_agent(org_a.client).status_code == 201
    response = create_agent(org_a.client)
    assert response.status_code == 429
    body = response.json()
    assert body["code"] == "rate_limited" and body["status"] == 429 and body["retry_after"] >= 1
    assert response["Retry-After"]
    assert _count(org_a) == 2
    cache.clear()


def test_patch_changes_fields_and_keeps_custom_id(org_a):
    created = create_agent(org_a.client, custom_id="patch_me").json()
    path = f"/v1/identity/agents/{created['agent_id']}"
    response = patch(org_a.client, path, {"display_name": "New Name", "bio": "hello", "category": "tool"})
    assert response.status_code == 200, response.json()
    assert response.json()["display_name"] == "New Name" and response.json()["bio"] == "hello"
    bad = patch(org_a.client, path, {"custom_id": "other_name"})
    assert bad.status_code == 400 and "immutable" in bad.json()["error"]
    to_webhook = patch(org_a.client, path, {"connection_mode": "webhook"})
    assert to_webhook.status_code == 400 and "webhook_url" in to_webhook.json()["error"]
    assert patch(org_a.client, path, {"display_name": "x"}).status_code == 400
    assert org_a.client.get(path).json()["display_name"] == "New Name"


def test_another_users_or_orgs_agent_is_404(org_a, org_b):
    from tenancy.services import api_key_create, membership_set

    created = create_agent(org_a.client).json()
    path = f"/v1/identity/agents/{created['agent_id']}"
    assert org_b.client.get(path).status_code == 404
    assert org_b.client.delete(path).status_code == 404
    member = membership_set(org=org_a.org, username="not-the-creator", password="pw", is_admin=False)
    _, key = api_key_create(org=org_a.org, user=member.user)
    stranger = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert stranger.get(path).json()["code"] == "not_found"
    assert patch(stranger, path, {"display_name": "Taken"}).status_code == 404
    assert post(stranger, path + "/token/regenerate").status_code == 404
    assert stranger.get(path + "/deletion-preview").status_code == 404
    assert _count(org_a) == 1


def test_no_principal_is_403_in_the_error_shape(org_a):
    response = Client().get("/v1/identity/agents")
    assert response.status_code == 403 and response.json()["code"] == "forbidden"
    response = Client(HTTP_AUTHORIZATION="Bearer ak_nope").post("/v1/identity/agents", "{}", content_type="application/json")
    assert response.status_code == 403 and response.json()["code"] == "forbidden"


def test_unknown_route_and_method_answer_the_error_shape(org_a):
    assert org_a.client.get("/v1/identity/nope").json()["code"] == "not_found"
    response = org_a.client.put("/v1/identity/agents", "{}", content_type="application/json")
    assert response.status_code == 405 and response.json()["code"] == "method_not_allowed"


def test_running_an_external_agent_is_409_agent_external(org_a):
    created = create_agent(org_a.client, custom_id="cannot_run").json()
    response = post(org_a.client, f"/v1/agents/{created['agent_id']}/run", {"input": "hi"})
    assert response.status_code == 409 and response.json()["code"] == "agent_external"


def test_openapi_document_declares_every_route_and_status(org_a):
    doc = Client().get("/v1/identity/openapi.json").json()
    paths = doc["paths"]
    for route in [
        "/v1/identity/agents",
        "/v1/identity/agents/{ref}",
        "/v1/identity/agents/{ref}/deletion-preview",
        "/v1/identity/agents/{ref}/token/regenerate",
        "/v1/identity/agents/{ref}/keys/register",
        "/v1/identity/agents/{ref}/relations",
        "/v1/identity/agents/{ref}/user-context/{user_id}/agents",
        "/v1/identity/agents/{ref}/messages",
        "/v1/identity/agents/{ref}/deliveries",
        "/v1/identity/deliveries/{delivery_id}/replay",
        "/v1/identity/users/{user_id}/messages",
        "/v1/identity/inbox",
        "/v1/identity/inbox/stream",
    ]:
        assert route in paths, route
    create = paths["/v1/identity/agents"]["post"]["responses"]
    assert {"201", "400", "403", "409", "429"} <= set(create)
    assert "agentToken" in doc["components"]["securitySchemes"]
    assert Client().get("/v1/identity/docs").status_code == 200
