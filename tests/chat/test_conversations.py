"""GET/POST /v1/agents/chat/conversations and GET/DELETE …/{id}: record, list, read, delete, per org."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from tests.chat.conftest import chat, stored, user
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

BASE = "/v1/agents/chat/conversations"


def record(org, body: dict):
    return org.client.post(BASE, body, content_type="application/json")


def test_recording_turns_answers_201_with_the_conversation_in_order(org_a, upstream):
    turns = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Line one\nline two"},
             {"role": "assistant", "content": "Sure."}, {"role": "tool", "content": "{}"}]

    response = record(org_a, {"messages": turns})

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"conversationId", "title", "createdBy", "messages"}
    assert body["title"] == "Line one line two" and body["createdBy"] == f"{org_a.slug}/{org_a.user.username}"  # who may share it
    assert [(m["role"], m["content"]) for m in body["messages"]] == [(t["role"], t["content"]) for t in turns]
    for message in body["messages"]:
        assert set(message) == {"id", "role", "content", "createdAt"} and message["id"].startswith("msg_")
    assert upstream.chat_requests == [] and stored(org_a)["runs"] == []
    read = org_a.client.get(f"{BASE}/{body['conversationId']}")
    assert read.status_code == 200 and read.json() == body


def test_recording_with_a_title_or_nothing(org_a):
    titled = record(org_a, {"title": " My\nthread ", "messages": user("hello")}).json()
    empty = record(org_a, {}).json()
    assert titled["title"] == "My thread"
    assert (empty["title"], empty["messages"]) == ("New conversation", [])


def test_a_recorded_thread_is_continued_by_a_round(funded, upstream):
    conversation = record(funded, {"messages": [{"role": "user", "content": "I like tea"}, {"role": "assistant", "content": "Noted."}]}).json()
    upstream.script(Reply(content="Tea."))

    body = chat(funded, {"messages": user("What do I like?"), "conversationId": conversation["conversationId"]}).json()

    assert body["conversationId"] == conversation["conversationId"]
    assert upstream.chat_requests[0]["messages"][1:] == [
        {"role": "user", "content": "I like tea"}, {"role": "assistant", "content": "Noted."}, {"role": "user", "content": "What do I like?"}]
    messages = funded.client.get(f"{BASE}/{body['conversationId']}").json()["messages"]
    assert [m["content"] for m in messages] == ["I like tea", "Noted.", "What do I like?", "Tea."]
    assert "runId" not in messages[0] and messages[3]["runId"] == body["runId"]


def test_the_list_is_most_recent_first_and_pages_with_a_cursor(funded, upstream):
    ids = [record(funded, {"title": f"c{i}"}).json()["conversationId"] for i in range(3)]
    chat(funded, {"messages": user("bump"), "conversationId": ids[0]})  # the oldest becomes the most recent

    first = funded.client.get(f"{BASE}?limit=2").json()
    second = funded.client.get(f"{BASE}?limit=2&cursor={first['nextCursor']}").json()

    assert [c["id"] for c in first["conversations"]] == [ids[0], ids[2]]
    assert [c["id"] for c in second["conversations"]] == [ids[1]] and "nextCursor" not in second
    assert set(first["conversations"][0]) == {"id", "title", "createdAt", "updatedAt"}


def test_the_list_reads_one_page_in_one_query(org_a):
    for i in range(3):
        record(org_a, {"title": f"c{i}"})
    with org_a.context():
        from tenancy import stores

        alias = stores.current_alias()
    with CaptureQueriesContext(connections[alias]) as queries:
        assert len(org_a.client.get(BASE).json()["conversations"]) == 3
    assert len(queries) == 1


def test_delete_answers_204_and_then_the_conversation_is_gone(org_a):
    conversation = record(org_a, {"messages": user("bye")}).json()["conversationId"]

    response = org_a.client.delete(f"{BASE}/{conversation}")

    assert response.status_code == 204 and response.content == b""
    assert org_a.client.get(f"{BASE}/{conversation}").status_code == 404
    assert stored(org_a)["conversations"] == [] and stored(org_a)["messages"] == []
    assert org_a.client.delete(f"{BASE}/{conversation}").status_code == 404


def test_unknown_conversations_are_404_in_the_error_shape(org_a):
    for method in ("get", "delete"):
        response = getattr(org_a.client, method)(f"{BASE}/conv_{'0' * 32}")
        assert response.status_code == 404
        assert response.json() == {"status": 404, "code": "not_found", "error": "conversation not found"}


def test_another_org_cannot_list_read_or_delete_a_conversation(org_a, org_b):
    conversation = record(org_a, {"messages": user("mine")}).json()["conversationId"]

    assert org_b.client.get(BASE).json() == {"conversations": []}
    assert org_b.client.get(f"{BASE}/{conversation}").status_code == 404
    assert org_b.client.delete(f"{BASE}/{conversation}").status_code == 404
    assert [c.id for c in stored(org_a)["conversations"]] == [conversation]


def test_conversations_need_a_principal(client):
    assert client.get(BASE).status_code == 403
    assert client.post(BASE, {}, content_type="application/json").status_code == 403
