"""Shared fixtures: orgs with their own store files and API keys, a loopback upstream."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest
from django.test import Client

from tenancy import stores


@dataclass
class OrgHandle:
    """A test org: its row, an admin user, an API key for that user, and a client using it."""

    org: object
    slug: str
    user: object
    key: str
    client: Client

    def context(self):
        """Act for this org (`with org.context(): …`)."""
        return stores.org_context(self.slug)


def _unique_slug(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_org(db):
    """Return a factory `make_org(prefix="t", admin=True, username=None) -> OrgHandle`."""
    from tenancy.services import api_key_create, membership_set, org_create

    def factory(prefix: str = "t", *, admin: bool = True, username: str | None = None) -> OrgHandle:
        slug = _unique_slug(prefix)
        org = org_create(slug=slug, name=slug)
        membership = membership_set(org=org, username=username or f"user-{slug}", password="pw", is_admin=admin)
        _, key = api_key_create(org=org, user=membership.user)
        return OrgHandle(org=org, slug=slug, user=membership.user, key=key, client=Client(HTTP_AUTHORIZATION=f"Bearer {key}"))

    return factory


@pytest.fixture
def org_a(make_org) -> OrgHandle:
    return make_org("a")


@pytest.fixture
def org_b(make_org) -> OrgHandle:
    return make_org("b")


@pytest.fixture(scope="session")
def upstream_server():
    """One loopback OpenAI-compatible server for the whole run (reset per test by `upstream`)."""
    from tests.support.upstream import Upstream

    server = Upstream().start()
    yield server
    server.stop()


@pytest.fixture
def upstream(upstream_server, settings):
    """The loopback upstream, wired as this test's inference gateway, with a clean script."""
    from agents import inference

    upstream_server.reset()
    upstream_server.models = ["test-model", "best"]
    settings.INFERENCE_BASE_URL = upstream_server.base_url
    settings.INFERENCE_API_KEY = "test-key"
    settings.AGENTS_DEFAULT_MODEL = "test-model"
    inference.reset_caches()
    yield upstream_server
    inference.reset_caches()
