"""The admin shows the acting org's conversations and turns, read-only (the API owns their rules)."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote
from django.test import Client

pytestmark = pytest.mark.django_db

CONVERSATIONS = "/admin/chat/conversation/"
MESSAGES = "/admin/chat/message/"


def _record(org, title: str, text: str) -> str:
    response = org.client.post("/v1/agents/chat/conversations", {"title": title, "messages": [{"role": "user", "content": text}]},
                               content_type="application/json")
    assert response.status_code == 201
    return response.json()["conversationId"]


def test_an_org_admin_sees_only_their_orgs_conversations_read_only(org_a, org_b):
    mine = _record(org_a, "title-of-a", "turn-of-a")
    _record(org_b, "title-of-b", "turn-of-b")
    client = Client()
    assert client.post("/admin/login/?next=/admin/", {"username": org_a.user.username, "password": "pw"}).status_code == 302

    page = client.get(CONVERSATIONS)
    messages = client.get(MESSAGES + "?q=" + mine)

    assert page.status_code == 200 and b"title-of-a" in page.content and b"title-of-b" not in page.content
    assert messages.status_code == 200 and b"turn-of-a" in messages.content and b"turn-of-b" not in messages.content
    assert client.get(CONVERSATIONS + "add/").status_code == 403
    change = client.get(f"{CONVERSATIONS}{quote(mine)}/change/")
    assert change.status_code == 200 and b'name="title"' not in change.content
    assert client.post(f"{CONVERSATIONS}{quote(mine)}/delete/", {"post": "yes"}).status_code == 403


def test_an_org_admin_sees_the_orgs_share_links_without_their_token_hash(org_a, org_b):
    """Share links (issue 57) are an org model: listed in the admin, read-only, the hash of the token never shown."""
    mine = _record(org_a, "shared-of-a", "turn-of-a")
    created = org_a.client.post(f"/v1/agents/chat/conversations/{mine}/shares", {}, content_type="application/json").json()
    theirs = _record(org_b, "shared-of-b", "turn-of-b")
    org_b.client.post(f"/v1/agents/chat/conversations/{theirs}/shares", {}, content_type="application/json")
    client = Client()
    assert client.post("/admin/login/?next=/admin/", {"username": org_a.user.username, "password": "pw"}).status_code == 302

    page = client.get("/admin/chat/sharelink/")
    assert page.status_code == 200 and created["id"].encode() in page.content and theirs.encode() not in page.content
    change = client.get(f"/admin/chat/sharelink/{quote(created['id'])}/change/")
    assert change.status_code == 200 and b"token_hash" not in change.content and created["token"].encode() not in change.content
    import hashlib

    assert hashlib.sha256(created["token"].encode()).hexdigest().encode() not in change.content
    assert client.get("/admin/chat/sharelink/add/").status_code == 403
