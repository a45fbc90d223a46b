"""Principals: API key, gateway JWT, session login — every credential failure is a 403."""

import time

import jwt
import pytest
from django.test import Client

from tenancy.models import ApiKey, Org
from tenancy.services import api_key_revoke, membership_set, org_create


def _forbidden(response, message=None):
    assert response.status_code == 403
    body = response.json()
    assert body["status"] == 403 and body["code"] == "forbidden"
    if message:
        assert body["error"] == message
    return body


def test_no_credential_is_forbidden(db):
    _forbidden(Client().get("/v1/agents"), "a validated principal is required")


def test_unknown_api_key_is_forbidden(db):
    _forbidden(Client(HTTP_AUTHORIZATION="Bearer ak_" + "0" * 48).get("/v1/agents"), "the API key is unknown or revoked")


def test_revoked_api_key_is_forbidden(org_a):
    assert org_a.client.get("/v1/agents").status_code == 200
    api_key_revoke(org=org_a.org, key_id=ApiKey.objects.get(org=org_a.org).pk)
    _forbidden(org_a.client.get("/v1/agents"))


def test_malformed_authorization_header_is_forbidden(org_a):
    _forbidden(Client(HTTP_AUTHORIZATION=f"Basic {org_a.key}").get("/v1/agents"))
    _forbidden(Client(HTTP_AUTHORIZATION="Bearer").get("/v1/agents"))


def test_api_key_is_stored_as_sha256_and_stamps_last_used(org_a):
    row = ApiKey.objects.get(org=org_a.org)
    assert org_a.key not in (row.key_hash, row.prefix) and len(row.key_hash) == 64
    assert row.last_used_at is None
    org_a.client.get("/v1/agents")
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_key_of_a_user_no_longer_member_is_forbidden(org_a):
    org_a.user.memberships.all().delete()
    _forbidden(org_a.client.get("/v1/agents"))


def test_org_is_never_taken_from_query_or_body(org_a, org_b):
    with org_a.context():
        from agents.services import AgentInput, agent_create

        agent_create(data=AgentInput(name="secret-a"))
    response = org_b.client.get(f"/v1/agents?org={org_a.slug}", HTTP_X_ORG_ID=org_a.slug)
    assert response.status_code == 200 and response.json() == {"agents": []}


@pytest.fixture
def jwt_key(settings):
    settings.AGENTS_GATEWAY_JWT_KEY = "gateway-test-secret-of-32-bytes!!"
    return settings.AGENTS_GATEWAY_JWT_KEY


def _token(key, **claims):
    base = {"sub": "carol", "org": "jwt-org", "exp": int(time.time()) + 60}
    base.update(claims)
    base = {k: v for k, v in base.items() if v is not None}
    return jwt.encode(base, key, algorithm="HS256")


def test_gateway_jwt_is_a_principal(db, jwt_key):
    response = Client(HTTP_AUTHORIZATION=f"Bearer {_token(jwt_key)}").post(
        "/v1/agents", {"name": "from-jwt"}, content_type="application/json"
    )
    assert response.status_code == 201
    assert Org.objects.filter(slug="jwt-org").exists()


def test_jwt_is_refused_when_no_gateway_key_is_configured(db):
    _forbidden(Client(HTTP_AUTHORIZATION=f"Bearer {_token('whatever-key-of-32-bytes-long!!!')}").get("/v1/agents"))


@pytest.mark.parametrize(
    "case",
    ["expired", "forged", "no_org", "bad_org", "no_sub", "alg_none"],
)
def test_bad_gateway_jwt_is_forbidden(db, jwt_key, case):
    token = {
        "expired": lambda: _token(jwt_key, exp=int(time.time()) - 10),
        "forged": lambda: _token("another-key-entirely-32-bytes!!!"),
        "no_org": lambda: _token(jwt_key, org=None),
        "bad_org": lambda: _token(jwt_key, org="../etc"),
        "no_sub": lambda: _token(jwt_key, sub=""),
        "alg_none": lambda: jwt.encode({"sub": "x", "org": "jwt-org", "exp": int(time.time()) + 60}, None, algorithm="none"),
    }[case]()
    _forbidden(Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/v1/agents"))
    assert not Org.objects.filter(slug="jwt-org").exists() or case == "no_sub"


def test_session_login_acts_for_a_membership(org_a):
    client = Client()
    client.force_login(org_a.user)
    assert client.get("/v1/agents").status_code == 200


def test_session_user_without_membership_has_no_org(db):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("loner", password="pw")
    client = Client()
    client.force_login(user)
    _forbidden(client.get("/v1/agents"), "an org scope is required")


def test_session_org_switch_only_among_memberships(org_a, org_b):
    membership_set(org=org_b.org, username=org_a.user.username, is_admin=False)
    client = Client()
    client.force_login(org_a.user)
    session = client.session
    session["agents_org"] = org_b.slug
    session.save()
    with org_b.context():
        from agents.services import AgentInput, agent_create

        agent_create(data=AgentInput(name="in-b"))
    assert [a["name"] for a in client.get("/v1/agents").json()["agents"]] == ["in-b"]
    outsider = org_create(slug="not-a-member-org")
    session["agents_org"] = outsider.slug
    session.save()
    # Not a member: falls back to the first membership by slug (org A, empty), never to the
    # requested org.
    response = client.get("/v1/agents")
    assert response.status_code == 200 and response.json() == {"agents": []}


def test_session_write_needs_csrf(org_a):
    client = Client(enforce_csrf_checks=True)
    client.force_login(org_a.user)
    response = client.post("/v1/agents", {"name": "csrf-less"}, content_type="application/json")
    _forbidden(response, "CSRF check failed")
    with org_a.context():
        from agents.models import Agent

        assert not Agent.objects.filter(name="csrf-less").exists()


@pytest.mark.parametrize(("claim", "is_admin"), [(True, True), ("true", True), (False, False), ("false", False), ("no", False), (1, False), (None, False)])
def test_gateway_jwt_org_admin_claim_is_true_only_when_it_says_true(db, jwt_key, claim, is_admin):
    from django.test import RequestFactory

    from tenancy.principal import resolve_principal

    claims = {"org_admin": claim} if claim is not None else {}
    request = RequestFactory().get("/v1/agents", HTTP_AUTHORIZATION=f"Bearer {_token(jwt_key, **claims)}")
    principal = resolve_principal(request)
    assert principal.org_slug == "jwt-org" and principal.is_org_admin is is_admin


def test_an_api_key_is_resolved_in_one_query_then_cached_and_written_at_most_once_a_minute(org_a):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from django.test import RequestFactory

    from tenancy.principal import forget_cached_principals, resolve_principal

    request = RequestFactory().get("/v1/agents", HTTP_AUTHORIZATION=f"Bearer {org_a.key}")
    ApiKey.objects.filter(org=org_a.org).update(last_used_at=None)
    forget_cached_principals()
    with CaptureQueriesContext(connection) as first:
        principal = resolve_principal(request)
    assert principal.org_slug == org_a.slug and principal.is_org_admin is True
    assert len(first.captured_queries) == 2  # the read, then the first last_used_at stamp
    stamped = ApiKey.objects.get(org=org_a.org).last_used_at
    assert stamped is not None and (timezone.now() - stamped).total_seconds() < 60
    with CaptureQueriesContext(connection) as cached:
        assert resolve_principal(request) == principal
    assert len(cached.captured_queries) == 0  # this process keeps the principal (tests/tenancy/test_principal_cache.py)
    forget_cached_principals()
    with CaptureQueriesContext(connection) as again:
        assert resolve_principal(request) == principal
    assert len(again.captured_queries) == 1 and again.captured_queries[0]["sql"].lstrip().upper().startswith("SELECT")


def test_a_removed_membership_refuses_the_key_on_the_next_request(org_a):
    from tenancy.models import Membership

    assert org_a.client.get("/v1/agents").status_code == 200
    Membership.objects.filter(user=org_a.user, org=org_a.org).delete()
    _forbidden(org_a.client.get("/v1/agents"), "the API key's user is no longer a member of its org")


def test_revocation_takes_effect_on_the_next_request_in_every_process(org_a, transactional_db):
    """Two daphne processes serve the same key; a revocation made here refuses it in both at once."""
    import httpx

    from tests.support.live import LiveServer

    servers = [LiveServer().start(), LiveServer().start()]
    try:
        headers = {"Authorization": f"Bearer {org_a.key}"}
        for server in servers:
            for _ in range(3):  # warm: any per-process state the resolution keeps is now filled
                assert httpx.get(server.url + "/v1/agents", headers=headers, timeout=30).status_code == 200
        api_key_revoke(org=org_a.org, key_id=ApiKey.objects.get(org=org_a.org).pk)
        for server in servers:
            refused = httpx.get(server.url + "/v1/agents", headers=headers, timeout=30)
            assert refused.status_code == 403 and refused.json()["error"] == "the API key is unknown or revoked"
    finally:
        for server in servers:
            server.stop()
