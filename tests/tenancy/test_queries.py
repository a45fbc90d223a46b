"""tenancy.queries (issue 27 item 3): each hand-written statement on SQLite and PostgreSQL,
returning what the ORM would read."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from tenancy import queries
from tenancy.models import ApiKey, Org
from tenancy.principal import hash_api_key
from tenancy.services import api_key_revoke, membership_remove

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def test_api_key_row_reads_the_key_its_user_org_and_admin_flag(org_a):
    row = queries.api_key_row(key_hash=hash_api_key(org_a.key), stale_before=timezone.now())
    key = ApiKey.objects.get(key_hash=hash_api_key(org_a.key))
    assert row == queries.ApiKeyRow(key_id=key.pk, revoked=False, stale_stamp=True, scope="all", allowed_agents=key.allowed_agents,
                                    username=org_a.user.username, user_active=True, user_id=org_a.user.pk,
                                    org_slug=org_a.slug, member_admin=True)


def test_api_key_row_says_stale_only_before_the_resolution(org_a):
    now = timezone.now()
    ApiKey.objects.filter(key_hash=hash_api_key(org_a.key)).update(last_used_at=now)
    assert queries.api_key_row(key_hash=hash_api_key(org_a.key), stale_before=now - timedelta(seconds=60)).stale_stamp is False
    assert queries.api_key_row(key_hash=hash_api_key(org_a.key), stale_before=now + timedelta(seconds=1)).stale_stamp is True


def test_api_key_row_sees_a_revocation_and_a_removed_membership(org_a):
    key = ApiKey.objects.get(key_hash=hash_api_key(org_a.key))
    membership_remove(org=org_a.org, user_id=org_a.user.pk)
    assert queries.api_key_row(key_hash=key.key_hash, stale_before=timezone.now()).member_admin is None
    api_key_revoke(org=org_a.org, key_id=key.pk)
    assert queries.api_key_row(key_hash=key.key_hash, stale_before=timezone.now()).revoked is True


def test_api_key_row_of_an_unknown_key_is_none(org_a):
    assert queries.api_key_row(key_hash=hash_api_key("ak_unknown"), stale_before=timezone.now()) is None


def test_org_by_slug_reads_the_row_as_the_orm_does(org_a):
    org = queries.org_by_slug(org_a.slug)
    assert org == Org.objects.get(slug=org_a.slug)
    assert isinstance(org.created_at, datetime) and org.created_at == Org.objects.get(slug=org_a.slug).created_at
    assert org._state.adding is False
    assert queries.org_by_slug("no-such-org") is None
