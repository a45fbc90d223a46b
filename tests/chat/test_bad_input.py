"""Bad input to POST /v1/agents/chat and POST …/conversations: a clear 4xx, nothing stored, nothing billed."""

from __future__ import annotations

import pytest

from tests.chat.conftest import charged, chat, stored, user

pytestmark = pytest.mark.django_db

KEY = "AKIA" + "IOSFODNN7EXAMPLE"  # an AWS access key id shape the scanner knows
OVER = "x" * (128 * 1024 + 1)
FUNCTION = {"type": "function", "function": {"name": "ok_tool"}}

BAD_ROUNDS = [
    ("no messages", {}, 400, "messages required"),
    ("empty messages", {"messages": []}, 400, "messages required"),
    ("null messages", {"messages": None}, 400, "messages required"),
    ("messages not a list", {"messages": "hi"}, 400, None),
    ("a message not an object", {"messages": ["hi"]}, 400, None),
    ("an unknown role", {"messages": [{"role": "robot", "content": "hi"}]}, 400, "messages[0].role must be one of system|user|assistant|tool"),
    ("no role", {"messages": [{"content": "hi"}]}, 400, "messages[0].role must be one of system|user|assistant|tool"),
    ("no content", {"messages": [{"role": "user"}]}, 400, "messages[0].content is required (a string)"),
    ("content not a string", {"messages": [{"role": "user", "content": 5}]}, 400, None),
    ("content over 128 KiB", {"messages": [{"role": "user", "content": "ok"}, {"role": "user", "content": OVER}]}, 400, "messages[1].content is over 128 KiB"),
    ("system over 128 KiB", {"messages": user("hi"), "system": OVER}, 400, "system is over 128 KiB"),
    ("a tool not an object", {"messages": user("hi"), "tools": ["calculator"]}, 400, None),
    ("a tool without function", {"messages": user("hi"), "tools": [{"type": "function"}]}, 400, None),
    ("a tool of another type", {"messages": user("hi"), "tools": [{"type": "retrieval", "function": {"name": "x"}}]}, 400, None),
    ("a tool with a bad name", {"messages": user("hi"), "tools": [{"type": "function", "function": {"name": "no spaces"}}]}, 400, None),
    ("a tool without a name", {"messages": user("hi"), "tools": [{"type": "function", "function": {}}]}, 400, None),
    ("parameters not an object", {"messages": user("hi"), "tools": [{"type": "function", "function": {"name": "x", "parameters": "no"}}]}, 400, None),
    ("tools not a list", {"messages": user("hi"), "tools": FUNCTION}, 400, None),
    ("stream as a string", {"messages": user("hi"), "stream": "true"}, 400, None),
    ("stream as a number", {"messages": user("hi"), "stream": 1}, 400, None),
    ("an unknown preset", {"messages": user("hi"), "preset": "graph"}, 400, "unknown preset: graph"),
    ("agent and preset", {"messages": user("hi"), "preset": "assistant", "agent": "x"}, 400, "give agent or preset, not both"),
    ("an unknown strategy", {"messages": user("hi"), "multitaskStrategy": "queue"}, 400, "multitaskStrategy must be one of reject|enqueue"),
    ("a credential in the last user message", {"messages": user(f"my key is {KEY}")}, 422, None),
    ("a credential in an earlier message", {"messages": [{"role": "user", "content": f"key {KEY}"}, {"role": "assistant", "content": "noted"}, {"role": "user", "content": "go"}]}, 422, None),
    ("a credential in a tool turn", {"messages": [{"role": "user", "content": "go"}, {"role": "tool", "content": f"{KEY}"}]}, 422, None),
    ("a credential in system", {"messages": user("hi"), "system": f"use {KEY}"}, 422, None),
    ("a body not an object", ["hi"], 400, "the request body must be a JSON object"),
]


def _nothing_happened(org, upstream) -> None:
    assert stored(org) == {"conversations": [], "messages": [], "runs": []}
    assert upstream.chat_requests == [] and charged(org) == []


@pytest.mark.parametrize(("case", "body", "status", "error"), BAD_ROUNDS, ids=[c[0] for c in BAD_ROUNDS])
def test_a_bad_round_is_refused_and_nothing_is_stored_or_billed(funded, upstream, case, body, status, error):
    response = chat(funded, body)

    assert response.status_code == status, response.content
    answer = response.json()
    assert answer["status"] == status and answer["error"]
    assert answer["code"] == ("secret_in_transcript" if status == 422 else "invalid_request")
    if error is not None:
        assert answer["error"] == error
    if status == 422:
        assert answer["findings"] and KEY not in response.content.decode()
    _nothing_happened(funded, upstream)


def test_a_bad_stream_round_is_refused_as_json_before_any_stream(funded, upstream):
    response = chat(funded, {"messages": user("hi"), "preset": "nope", "stream": True})
    assert response.status_code == 400 and response["Content-Type"].startswith("application/json")
    assert response.json()["error"] == "unknown preset: nope"
    _nothing_happened(funded, upstream)


BAD_RECORDS = [
    ("an unknown role", {"messages": [{"role": "robot", "content": "hi"}]}, 400),
    ("content over 128 KiB", {"messages": [{"role": "user", "content": OVER}]}, 400),
    ("a title over 80 characters", {"title": "t" * 81}, 400),
    ("messages not a list", {"messages": {"role": "user", "content": "x"}}, 400),
    ("a credential in any message", {"messages": [{"role": "assistant", "content": f"here: {KEY}"}]}, 422),
]


@pytest.mark.parametrize(("case", "body", "status"), BAD_RECORDS, ids=[c[0] for c in BAD_RECORDS])
def test_bad_recorded_turns_are_refused_and_nothing_is_stored(funded, upstream, case, body, status):
    response = funded.client.post("/v1/agents/chat/conversations", body, content_type="application/json")
    assert response.status_code == status, response.content
    assert response.json()["code"] == ("secret_in_transcript" if status == 422 else "invalid_request")
    _nothing_happened(funded, upstream)


@pytest.mark.parametrize("query", ["limit=0", "limit=x", "cursor=nope"])
def test_a_bad_page_of_conversations_is_400(funded, query):
    response = funded.client.get(f"/v1/agents/chat/conversations?{query}")
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
