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
