"""A stop posted while a conversation round streams (issue 25): the upstream stream is closed
before its end, the round ends with one `error` frame whose run says `finishReason: stopped`,
and the session holds only the run's end after the stop."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.agents.test_stop import WORDS, assert_only_the_end_after_the_stop, closed_early, long_reply, streaming
from tests.chat.conftest import charged, chat, fund, user
from tests.chat.test_stream import frames

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def funded(org_a):
    fund(org_a)
    return org_a


def test_a_stop_closes_the_upstream_stream_of_a_streamed_round(funded, upstream):
    upstream.script(long_reply())
    response = chat(funded, {"messages": user("talk"), "stream": True})
    assert response.status_code == 200
    loop = asyncio.new_event_loop()
    content = response.streaming_content

    def pieces():
        while True:
            try:
                yield loop.run_until_complete(content.__anext__())
            except StopAsyncIteration:
                return

    pieces = pieces()
    head = b""
    while b"event: start" not in head or b"\n\n" not in head.split(b"event: start", 1)[1]:
        head += next(pieces)
    start = json.loads(head.split(b"event: start", 1)[1].split(b"data: ", 1)[1].split(b"\n", 1)[0])
    streaming(upstream)

    stopped = funded.client.post(f"/v1/agents/sessions/{start['sessionId']}/stop", {}, content_type="application/json")
    rest = frames([head, *pieces])
    loop.close()

    assert stopped.status_code == 200
    closed_early(upstream)
    assert len(upstream.chat_requests) == 1
    deltas = "".join(data["text"] for event, data in rest if event == "delta")
    event, last = rest[-1]
    assert event == "error" and last["run"]["finishReason"] == "stopped" and last["run"]["status"] == "error"
    assert last["run"]["output"] == deltas and WORDS.startswith(deltas)  # the partial reply, once
    assert_only_the_end_after_the_stop(funded, start["sessionId"], partial=deltas)
    assert charged(funded) == []
