"""The admin shows the acting org's sessions and events; events are read-only; edits obey the rules."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions.models import Event, Session
from tests.sessions.conftest import append, new_session

SESSIONS = "/admin/agent_sessions/session/"
EVENTS = "/admin/agent_sessions/event/"


@pytest.fixture
def admin_client(org_a) -> Client:
    client = Client()
    assert client.post("/admin/login/?next=/admin/", {"username": org_a.user.username, "password": "pw"}).status_code == 302
    return client


def test_an_org_admin_sees_only_their_orgs_sessions_and_events(org_a, org_b, admin_client):
    mine = new_session(org_a, agent="builder-of-a", title="title-of-a")
    theirs = new_session(org_b, agent="builder-of-b", title="title-of-b")
    event = append(org_a, mine["id"], payload={"text": "turn-of-a"})
    append(org_b, theirs["id"], payload={"text": "turn-of-b"})
    page = admin_client.get(SESSIONS)
    assert page.status_code == 200
    assert b"title-of-a" in page.content and b"title-of-b" not in page.content
    events = admin_client.get(EVENTS)
    assert events.status_code == 200 and event["id"].encode() in events.content and b"turn-of-b" not in events.content


def test_sessions_filter_by_status_and_search_by_agent_or_title(org_a, admin_client):
    new_session(org_a, agent="alpha", title="first-title", status="done")
    new_session(org_a, agent="beta", title="second-title")
    done = admin_client.get(SESSIONS, {"status__exact": "done"}).content
    assert b"first-title" in done and b"second-title" not in done
    by_agent = admin_client.get(SESSIONS, {"q": "beta"}).content
    assert b"second-title" in by_agent and b"first-title" not in by_agent
    by_title = admin_client.get(SESSIONS, {"q": "first-title"}).content
    assert b"first-title" in by_title and b"second-title" not in by_title


def test_events_are_read_only(org_a, admin_client):
    session = new_session(org_a)
    event = append(org_a, session["id"], payload={"text": "kept"})
    url = f"{EVENTS}{event['id']}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200 and b'name="_save"' not in page.content
    assert admin_client.post(url, {"kind": "log", "payload": "{}"}).status_code == 403
    assert admin_client.post(f"{EVENTS}{event['id']}/delete/", {"post": "yes"}).status_code == 403
    assert admin_client.get(f"{EVENTS}add/").status_code == 403
    with org_a.context():
        assert Event.objects.get(pk=event["id"]).payload == '{"text":"kept"}'


def test_an_admin_edit_obeys_the_session_rules(org_a, admin_client):
    finished = new_session(org_a, status="done", title="done-title")
    url = f"{SESSIONS}{finished['id']}/change/"
    reopened = admin_client.post(url, {"title": "done-title", "status": "running", "project": "", "published": ""})
    assert reopened.status_code == 200 and b"session is done; cannot change status" in reopened.content
    unpublishable = admin_client.post(url, {"title": "done-title", "status": "done", "project": "", "published": "on"})
    assert b"published requires a project" in unpublishable.content
    saved = admin_client.post(url, {"title": "renamed", "status": "done", "project": "shop", "published": "on"})
    assert saved.status_code == 302
    with org_a.context():
        stored = Session.objects.get(pk=finished["id"])
    assert (stored.title, stored.status, stored.project, stored.published) == ("renamed", "done", "shop", True)
    assert admin_client.get(f"{SESSIONS}add/").status_code == 403
