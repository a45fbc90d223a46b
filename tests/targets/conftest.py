"""Fixtures of the targets tests: more members of one org, registered machines, offers."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client

from tests.conftest import OrgHandle


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    """Test users get passwords; hash them cheaply (the default hasher costs ~0.3 s each)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@dataclass
class Member:
    """Another member of an org: its subject and a client with its own API key."""

    username: str
    client: Client
    key: str


@pytest.fixture
def add_member():
    """Return `add_member(org_handle, admin=False) -> Member` (a new user with its own API key)."""
    from tenancy.services import api_key_create, membership_set

    counter = {"n": 0}

    def factory(handle: OrgHandle, *, admin: bool = False) -> Member:
        counter["n"] += 1
        username = f"m{counter['n']}-{handle.slug}"
        membership = membership_set(org=handle.org, username=username, password="pw", is_admin=admin)
        _, key = api_key_create(org=handle.org, user=membership.user)
        return Member(username=username, client=Client(HTTP_AUTHORIZATION=f"Bearer {key}"), key=key)

    return factory


def post(client: Client, path: str, body: dict | None = None, **headers):
    """POST JSON `body` to `/v1/agents/targets{path}`."""
    return client.post("/v1/agents/targets" + path, body or {}, content_type="application/json", headers=headers)


def patch(client: Client, path: str, body: dict):
    """PATCH JSON `body` to `/v1/agents/targets{path}`."""
    return client.patch("/v1/agents/targets" + path, body, content_type="application/json")


def owned_by(handle: OrgHandle, member: Member, body: dict) -> dict:
    """Register a machine as `handle`'s admin (only admins register, issue 50) and hand it to
    `member` (its `owner`, as a machine a member registered before then): the machine's view."""
    from targets.models import Target

    r = post(handle.client, "", body)
    assert r.status_code == 201, r.content
    with handle.context():
        Target.objects.filter(pk=r.json()["id"]).update(owner=member.username)
    return r.json()


@pytest.fixture
def machine(org_a):
    """A machine registered by org_a's admin, with a claim key: `(target_id, claim_key)`."""
    r = post(org_a.client, "", {"label": "box", "host": "box.local"})
    assert r.status_code == 201
    target_id = r.json()["id"]
    k = post(org_a.client, f"/{target_id}/key")
    assert k.status_code == 200
    return target_id, k.json()["claimKey"]


def offer(handle: OrgHandle, target_id: str, run_id: str = "run_1", session_id: str = "sess_1", payload: dict | None = None):
    """Offer a run to `target_id` in `handle`'s org through the service (as the run path does)."""
    from targets.services import routed_offer

    with handle.context():
        return routed_offer(target_id=target_id, run_id=run_id, session_id=session_id, payload=payload or {"input": "hi"})
