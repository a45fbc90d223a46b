"""Share links of conversations and sessions (issue 57 item 3): who may make, list and revoke them,
a random token stored only as its hash, the anonymous page and JSON (turns only, masked, with who
shared and when), the same 404 for an unknown, revoked or expired token, and the read rate limit."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from chat.models import Conversation, Message, ShareLink
from sessions import services as sessions
from tests.support.credentials import credential_corpus
from tests.support.store_scan import planted

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

READ = "/v1/agents/chat/shares/read"


ADDRESSES = ("127.0.0.1", "10.0.0.9")  # the test client's address, and another one


@pytest.fixture(autouse=True)
def fresh_rate_counts():
    """The read limit counts per client address in Django's cache: each test starts from none.

    Only these counts are dropped (never `cache.clear()`: on Redis that would empty a database
    other test runs share)."""
    keys = [f"throttle_share_read_{address}" for address in ADDRESSES]
    cache.delete_many(keys)
    yield
    cache.delete_many(keys)


def _conversation(org, *turns) -> str:
    body = {"title": "Invoices", "messages": [{"role": role, "content": text} for role, text in turns]}
    response = org.client.post("/v1/agents/chat/conversations", body, content_type="application/json")
    assert response.status_code == 201, response.content
    return response.json()["conversationId"]


def _share(org, path: str, client=None, **body):
    return (client or org.client).post(path, body, content_type="application/json")


def _member(org, name: str):
    """A non-admin member of `org` with its own API key: `(client, actor)`."""
    from tenancy.services import api_key_create, membership_set

    member = membership_set(org=org.org, username=f"{name}-{org.slug}", password="pw", is_admin=False)
    _, key = api_key_create(org=org.org, user=member.user)
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}"), f"{org.slug}/{member.user.username}"


def _read(token: str):
    return Client().get(READ, {"token": token})


def test_a_shared_conversation_is_read_anonymously_with_its_turns_sharer_and_date(org_a):
    conversation = _conversation(org_a, ("system", "You are terse."), ("user", "Sum the invoices"), ("assistant", "It is 42."))
    created = _share(org_a, f"/v1/agents/chat/conversations/{conversation}/shares")
    assert created.status_code == 201, created.content
    share = created.json()
    token = share["token"]
    assert re.fullmatch(rf"shr_{org_a.slug}_[A-Za-z0-9_-]{{32}}", token)  # 24 random bytes: 192 bits
    assert share["url"] == f"http://testserver/shared/{token}/" and share["state"] == "active" and share["subject"] == "conversation"
    expires = timezone.datetime.fromisoformat(share["expiresAt"].replace("Z", "+00:00")) - timezone.now()
    assert timedelta(days=29, hours=23) < expires <= timedelta(days=30)  # the default: 30 days

    read = _read(token)
    assert read.status_code == 200, read.content
    body = read.json()
    assert body["subject"] == "conversation" and body["title"] == "Invoices" and body["sharedBy"] == org_a.user.username
    assert [(t["role"], t["text"]) for t in body["turns"]] == [("user", "Sum the invoices"), ("assistant", "It is 42.")]  # no system turn

    page = Client().get(f"/shared/{token}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "It is 42." in html and "Sum the invoices" in html and org_a.user.username in html and "You are terse." not in html
    assert page["Cache-Control"] == "no-store" and page["Referrer-Policy"] == "no-referrer"
    with org_a.context():
        row = ShareLink.objects.get()
        assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
        assert token not in json.dumps([str(getattr(row, f.name)) for f in ShareLink._meta.fields])  # a credential: only its hash is stored


def test_a_credential_in_a_stored_turn_is_masked_on_the_shared_page(org_a):
    conversation = _conversation(org_a, ("user", "hello"))
    secret = next(value for name, _text, value in credential_corpus() if name == "github-classic-pat")
    with org_a.context(), planted(org_a):  # a turn that reached the store before any scan (a model's reply written long ago)
        Message.objects.create(conversation_id=conversation, position=99, role="assistant", content=f"the key is {secret}",
                               created_at=timezone.now())
    token = _share(org_a, f"/v1/agents/chat/conversations/{conversation}/shares").json()["token"]
    read = _read(token)
    assert secret not in read.content.decode() and "[redacted:" in read.json()["turns"][-1]["text"]
    assert secret not in Client().get(f"/shared/{token}/").content.decode()


def test_a_shared_session_shows_its_turns_but_no_control_or_log_events(org_a):
    with org_a.context():
        session = sessions.session_create(agent="helper", actor=org_a.user.username, title="Count")
        for kind, payload in [("message", {"role": "user", "text": "count to two"}),
                              ("tool-call", {"name": "calculator", "arguments": {"expression": "1+1"}, "result": "2"}),
                              ("control", {"command": "pause", "message": "hold on"}),
                              ("message", {"role": "assistant", "text": "one, two"}),
                              ("log", {"runId": "run_1", "status": "ok", "summary": "internal bookkeeping"})]:
            sessions.session_append_event(session_id=session.id, kind=kind, payload=payload, actor="helper")
    token = _share(org_a, f"/v1/agents/sessions/{session.id}/shares", expiresInDays=365).json()["token"]
    body = _read(token).json()
    assert body["subject"] == "session" and body["title"] == "Count"
    assert [t["kind"] for t in body["turns"]] == ["message", "tool-call", "message"]
    assert body["turns"][1]["tool"]["name"] == "calculator" and body["turns"][2]["text"] == "one, two"
    text = json.dumps(body)
    assert "hold on" not in text and "internal bookkeeping" not in text


def test_unknown_revoked_and_expired_tokens_are_the_same_404(org_a, org_b):
    conversation = _conversation(org_a, ("user", "hi"))
    token = _share(org_a, f"/v1/agents/chat/conversations/{conversation}/shares").json()["token"]
    other = _share(org_a, f"/v1/agents/chat/conversations/{conversation}/shares").json()
    assert _read(token).status_code == 200

    # Revoked: the very next read is a 404, the page too.
    assert org_a.client.delete(f"/v1/agents/chat/shared/{other['id']}").status_code == 204
    assert org_a.client.delete(f"/v1/agents/chat/shared/{other['id']}").status_code == 204  # stays revoked
    # Expired.
    with org_a.context():
        ShareLink.objects.filter(token_hash=hashlib.sha256(token.encode()).hexdigest()).update(expires_at=timezone.now() - timedelta(seconds=1))
    secret = token.split("_", 2)[2]
    answers = [_read(t) for t in (token, other["token"], f"shr_{org_a.slug}_{'x' * 32}", f"shr_{org_b.slug}_{secret}",
                                  f"shr_nosuchorg_{secret}", "not-a-token", "shr_../../etc_" + secret)]
    assert [a.status_code for a in answers] == [404] * 7
    assert all(a.json() == answers[0].json() for a in answers), [a.json() for a in answers]
    assert answers[0].json() == {"status": 404, "code": "not_found", "error": "this share link does not exist, was revoked or has expired"}
    for t in (token, other["token"], f"shr_{org_a.slug}_{'x' * 32}"):
        assert Client().get(f"/shared/{t}/").status_code == 404
    from tenancy import stores

    assert not stores.store_exists("nosuchorg")  # a made-up org in a token never creates a store
    listed = {s["id"]: s["state"] for s in org_a.client.get(f"/v1/agents/chat/conversations/{conversation}/shares").json()["shares"]}
    assert sorted(listed.values()) == ["expired", "revoked"]


def test_only_the_starter_or_an_admin_shares_lists_and_revokes(org_a, org_b):
    theirs = _conversation(org_a, ("user", "admin's thread"))
    member, actor = _member(org_a, "mia")
    mine = member.post("/v1/agents/chat/conversations", {"messages": [{"role": "user", "content": "mine"}]},
                       content_type="application/json").json()["conversationId"]
    with org_a.context():
        assert Conversation.objects.get(pk=mine).created_by == actor

    refused = _share(org_a, f"/v1/agents/chat/conversations/{theirs}/shares", client=member)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert member.get(f"/v1/agents/chat/conversations/{theirs}/shares").status_code == 403
    admin_link = _share(org_a, f"/v1/agents/chat/conversations/{theirs}/shares").json()
    assert member.delete(f"/v1/agents/chat/shared/{admin_link['id']}").status_code == 403
    member_link = _share(org_a, f"/v1/agents/chat/conversations/{mine}/shares", client=member)
    assert member_link.status_code == 201
    assert org_a.client.delete(f"/v1/agents/chat/shared/{member_link.json()['id']}").status_code == 204  # an admin revokes any

    # The lists: an admin sees the org's links, a member the ones they made.
    assert {s["id"] for s in org_a.client.get("/v1/agents/chat/shared").json()["shares"]} == {admin_link["id"], member_link.json()["id"]}
    assert [s["id"] for s in member.get("/v1/agents/chat/shared").json()["shares"]] == [member_link.json()["id"]]
    assert all("token" not in s for s in org_a.client.get("/v1/agents/chat/shared").json()["shares"])
    # Another org's conversation or link: 404, as a missing one.
    assert _share(org_b, f"/v1/agents/chat/conversations/{theirs}/shares").status_code == 404
    assert org_b.client.delete(f"/v1/agents/chat/shared/{admin_link['id']}").status_code == 404
    with org_a.context():
        assert ShareLink.objects.count() == 2 and ShareLink.objects.get(pk=admin_link["id"]).revoked_at is None


@pytest.mark.parametrize("days", [0, 366, -1, "30", 1.5, True])
def test_an_expiry_outside_one_to_365_days_is_refused_and_nothing_is_stored(org_a, days):
    conversation = _conversation(org_a, ("user", "hi"))
    refused = _share(org_a, f"/v1/agents/chat/conversations/{conversation}/shares", expiresInDays=days)
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_request"
    with org_a.context():
        assert not ShareLink.objects.exists()


def test_the_deployments_lower_most_is_held(org_a, settings):
    settings.AGENTS_SHARE_MAX_DAYS = 7
    conversation = _conversation(org_a, ("user", "hi"))
    assert _share(org_a, f"/v1/agents/chat/conversations/{conversation}/shares", expiresInDays=8).status_code == 400
    assert _share(org_a, f"/v1/agents/chat/conversations/{conversation}/shares", expiresInDays=7).status_code == 201


def test_anonymous_reads_are_rate_limited_per_address(org_a, settings):
    settings.AGENTS_SHARE_READ_RATE = "3/min"
    conversation = _conversation(org_a, ("user", "hi"))
    token = _share(org_a, f"/v1/agents/chat/conversations/{conversation}/shares").json()["token"]
    assert [_read(token).status_code, Client().get(f"/shared/{token}/").status_code, _read("unknown").status_code] == [200, 200, 404]
    limited = _read(token)
    assert limited.status_code == 429 and limited.json()["code"] == "rate_limited" and int(limited["Retry-After"]) >= 1
    page = Client().get(f"/shared/{token}/")
    assert page.status_code == 429 and "Too many requests" in page.content.decode()
    other = Client(REMOTE_ADDR="10.0.0.9").get(READ, {"token": token})  # another address has its own count
    assert other.status_code == 200
