"""A conversation against a gateway whose context window it outgrew (issue 31 item 2): the round
that overflows is a clear `context_length_exceeded`, the next round of that conversation works,
trimmed to the window the gateway named."""

from __future__ import annotations

import pytest

from tests.chat.conftest import chat, stored, user

pytestmark = pytest.mark.django_db


def test_an_overflowing_round_is_named_and_the_next_round_of_the_conversation_is_trimmed(funded, upstream):
    upstream.context_window = 60  # words; llama-cpp-python's way: a broken stream, its 400 when not streamed
    made = funded.client.post("/v1/agents", {"name": "brief", "instructions": "Be brief."}, content_type="application/json")
    assert made.status_code == 201
    long = "a long note about the weather " * 20  # 120 words, 600 bytes

    first = chat(funded, {"messages": user(long), "agent": "brief"})

    assert first.status_code == 400  # the caller's prompt is over the window: its 400, never re-sent (issue 53)
    body = first.json()
    assert body["code"] == "context_length_exceeded" and body["error"].startswith("context_length_exceeded: the prompt (")
    assert "context window of 60 tokens" in body["error"]
    [run] = stored(funded)["runs"]
    assert (run.status, run.attempts) == ("error", 1)

    again = chat(funded, {"messages": user("and now, briefly?"), "conversationId": body["conversationId"], "agent": "brief"})

    assert again.status_code == 200, again.content
    sent = upstream.chat_requests[-1]["messages"]
    assert sent[-1] == {"role": "user", "content": "and now, briefly?"}
    assert all(long.strip() not in str(m["content"]) for m in sent)  # the old turn that overflowed was dropped
