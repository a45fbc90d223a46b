"""The quota is counted inside the insert's org-store transaction: no race past it (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading

import pytest
from django.db import connections

from agents_site.errors import ApiError
from identity.models import IdentityProfile
from identity.services import IdentityInput, identity_agent_create
from tenancy import stores

pytestmark = pytest.mark.django_db


def _race(slug: str, creator: str, n: int) -> list[str]:
    outcomes: list[str] = []
    barrier = threading.Barrier(n)

    def one():
        barrier.wait()
        try:
            with stores.org_context(slug):
                identity_agent_create(creator_id=creator, data=IdentityInput(display_name="Racer", connection_mode="websocket"))
            outcomes.append("created")
        except ApiError as exc:
            outcomes.append(str(exc.code))
        finally:
            for alias in list(connections):
                if stores.is_org_alias(alias):
                    connections[alias].close()

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outcomes


def test_concurrent_creates_never_pass_the_quota_sqlite(make_org, settings):
    settings.AGENTS_IDENTITY_QUOTA = 3
    org = make_org("q")
    outcomes = _race(org.slug, "racer", 8)
    assert sorted(outcomes) == ["agent_limit_exceeded"] * 5 + ["created"] * 3
    with org.context():
        assert IdentityProfile.objects.filter(creator_id="racer").count() == 3


def test_concurrent_creates_never_pass_the_quota_postgres(make_org, settings, postgres_orgs):
    settings.AGENTS_IDENTITY_QUOTA = 3
    org = make_org("qp")
    postgres_orgs.append(org.slug)
    outcomes = _race(org.slug, "racer", 8)
    assert sorted(outcomes) == ["agent_limit_exceeded"] * 5 + ["created"] * 3
    with org.context():
        assert IdentityProfile.objects.filter(creator_id="racer").count() == 3
