"""The per-process cache of API-key principals (issue 59): kept briefly, refused at once when revoked.

A key's principal is read once and kept `AGENTS_API_KEY_CACHE_SECONDS`; a revocation reaches the
cache through the revocation broadcast (`tenancy.revocation.revoked_since`), and a change to the
key, its user's membership or its user through any model save reaches it through the model
signals. Each test first shows the key is served from the cache (no query, or a row changed
behind the cache's back still answered), then that the very next request after the revocation
is refused. Across processes: tests/tenancy/test_principal.py (two daphnes, in-memory layer) and
tests/tenancy/test_revocation_live.py (two daphnes on Redis).
"""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tenancy import principal as principal_module
from tenancy import revocation
from tenancy.models import ApiKey, Membership
from tenancy.principal import forget_cached_principals, resolve_principal
from tenancy.services import api_key_create, api_key_revoke, member_user_create, membership_role_set

pytestmark = pytest.mark.both_stores

REVOKED = {"status": 403, "code": "forbidden", "error": "the API key is unknown or revoked"}


@pytest.fixture(autouse=True)
def _listening(settings):
    """On the Redis layer the cache serves only while this process's revocation listener is in the group.

    The longest lifetime: a loaded host may take seconds between two requests of a test.
    """
    settings.AGENTS_API_KEY_CACHE_SECONDS = 30
    assert revocation.start(wait_seconds=10)
    forget_cached_principals()
    yield
    forget_cached_principals()


def _resolve(key: str):
    return resolve_principal(RequestFactory().get("/v1/agents", HTTP_AUTHORIZATION=f"Bearer {key}"))


def _served_from_cache(key: str):
    """Resolve `key` twice; assert the second answer ran no query; return the principal."""
    first = _resolve(key)
    with CaptureQueriesContext(connection) as queries:
        assert _resolve(key) == first
    assert queries.captured_queries == []
    return first


def test_a_key_revoked_through_the_broadcast_alone_is_refused_on_the_very_next_request(org_a):
    assert org_a.client.get("/v1/agents").status_code == 200
    row = ApiKey.objects.get(org=org_a.org)
    ApiKey.objects.filter(pk=row.pk).update(revoked_at=timezone.now())  # no signal: only the broadcast tells the cache
    assert org_a.client.get("/v1/agents").status_code == 200  # the cached principal still answers
    revocation.revoke([revocation.key_revoked(row.pk)])
    refused = org_a.client.get("/v1/agents")
    assert refused.status_code == 403 and refused.json() == REVOKED


def test_api_key_revoke_refuses_the_cached_key_at_once_and_keeps_the_users_other_keys(org_a):
    _, other = api_key_create(org=org_a.org, user=org_a.user, name="other")
    _served_from_cache(org_a.key)
    kept = _served_from_cache(other)
    api_key_revoke(org=org_a.org, key_id=ApiKey.objects.get(org=org_a.org, name="").pk)
    refused = org_a.client.get("/v1/agents")
    assert refused.status_code == 403 and refused.json() == REVOKED
    assert ApiKey.objects.get(org=org_a.org, name="").revoked_at is not None
    assert _resolve(other) == kept


def test_a_role_change_is_seen_on_the_next_request(org_a):
    other = member_user_create(org=org_a.org, username=f"second-{org_a.slug}", password="second long pass 9").user
    membership_role_set(org=org_a.org, user_id=other.pk, is_admin=True)
    assert _served_from_cache(org_a.key).is_org_admin is True
    membership_role_set(org=org_a.org, user_id=org_a.user.pk, is_admin=False)
    assert _resolve(org_a.key).is_org_admin is False
    assert Membership.objects.get(org=org_a.org, user=org_a.user).is_admin is False


def test_a_deactivated_user_is_refused_on_the_next_request(org_a):
    _served_from_cache(org_a.key)
    org_a.user.is_active = False
    org_a.user.save()
    refused = org_a.client.get("/v1/agents")
    assert refused.status_code == 403 and refused.json() == REVOKED


def test_a_refusal_is_never_cached(org_a):
    row = ApiKey.objects.get(org=org_a.org)
    ApiKey.objects.filter(pk=row.pk).update(revoked_at=timezone.now())
    assert org_a.client.get("/v1/agents").status_code == 403
    ApiKey.objects.filter(pk=row.pk).update(revoked_at=None)
    assert org_a.client.get("/v1/agents").status_code == 200


def test_the_cache_keeps_at_most_its_bound_dropping_the_least_recently_used(org_a, monkeypatch):
    monkeypatch.setattr(principal_module, "CACHE_MAX_KEYS", 2)
    keys = [org_a.key] + [api_key_create(org=org_a.org, user=org_a.user, name=f"k{i}")[1] for i in range(2)]
    for key in keys:
        _resolve(key)
    assert len(principal_module._cache) == 2
    with CaptureQueriesContext(connection) as queries:
        _resolve(keys[0])  # dropped first: read again
    assert len(queries.captured_queries) == 1


def test_a_zero_lifetime_reads_the_key_on_every_request(org_a, settings):
    settings.AGENTS_API_KEY_CACHE_SECONDS = 0
    _resolve(org_a.key)
    with CaptureQueriesContext(connection) as queries:
        _resolve(org_a.key)
    assert len(queries.captured_queries) == 1 and principal_module._cache == {}
