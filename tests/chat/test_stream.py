"""POST /v1/agents/chat with `stream: true`: delta, tool and ops frames, then one `chat` (or `error`) frame."""

from __future__ import annotations

import json

import pytest

from tests.chat.conftest import charged, chat, fund, stored, user
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def frames(response) -> list[tuple[str, dict]]:
    """Return the stream's `(event, data)` frames in order (pings left out)."""
    text = b"".join(response).decode()
    out = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        event = next((line[len("event: "):] for line in lines if line.startswith("event: ")), None)
        data = next(line[len("data: "):] for line in lines if line.startswith("data: "))
        out.append((event, json.loads(data)))
    return out


@pytest.fixture
def funded(org_a):
    fund(org_a)
    return org_a


def test_a_streamed_round_sends_deltas_then_the_chat_frame_with_the_run(funded, upstream):
    upstream.script(Reply(content=None, tool_calls=[("calculator", {"expression": "2*21"})]), Reply(content="42."))

    response = chat(funded, {"messages": user("2*21?"), "stream": True})

    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    got = frames(response)
    opening = got.pop(0)  # first: the run's ids, so a client can watch or stop it while it streams
    assert [event for event, _ in got] == ["tool", "delta", "chat"]
    assert opening[0] == "start" and set(opening[1]) == {"runId", "sessionId", "conversationId"}
    assert opening[1]["runId"] == got[-1][1]["runId"] and opening[1]["sessionId"] == got[-1][1]["run"]["sessionId"]
    assert opening[1]["conversationId"] == got[-1][1]["conversationId"]
    assert (response["X-Agents-Run-Id"], response["X-Agents-Session-Id"]) == (opening[1]["runId"], opening[1]["sessionId"])
    assert got[0][1] == {"name": "calculator", "args": {"expression": "2*21"}, "result": "42"}
    assert got[1][1] == {"text": "42."}
    final = got[-1][1]
    run = final.pop("run")
    assert set(final) == {"reply", "actions", "ops", "conversationId", "runId"}
    assert (final["reply"], final["actions"], final["ops"]) == ("42.", [got[0][1]], [])
    assert (run["id"], run["kind"], run["status"], run["output"]) == (final["runId"], "chat", "ok", "42.")
    assert [m.content for m in stored(funded)["messages"]] == ["2*21?", "42."]
    assert [d.run_id for d in charged(funded)] == [final["runId"]]


def test_a_streamed_round_hands_client_calls_back_as_an_ops_frame(funded, upstream):
    upstream.script(Reply(content=None, tool_calls=[("open_form", {"form": "create_agent"})]))

    got = frames(chat(funded, {"messages": user("new agent"), "preset": "system", "stream": True}))[1:]

    assert [event for event, _ in got] == ["ops", "chat"]
    assert got[0][1] == {"ops": [{"name": "open_form", "args": {"form": "create_agent"}}]}
    assert got[1][1]["ops"] == got[0][1]["ops"]


def test_a_streamed_round_whose_run_failed_ends_with_an_error_frame(funded, upstream):
    upstream.script(*[Reply(status=500)] * 3)

    got = frames(chat(funded, {"messages": user("hello?"), "stream": True}))

    [(start, opening), (event, data)] = got
    assert start == "start" and opening["runId"] == data["runId"]
    assert event == "error"
    run = data.pop("run")
    assert (data["status"], data["code"], data["runId"]) == (502, "run_failed", run["id"])
    assert run["status"] == "error" and data["error"] == run["error"]
    assert data["conversationId"] == stored(funded)["conversations"][0].id
    assert [m.content for m in stored(funded)["messages"]] == ["hello?"] and charged(funded) == []


def test_a_refused_streamed_round_is_plain_json(org_a, upstream):
    response = chat(org_a, {"messages": user("hi"), "stream": True})  # no balance
    assert response.status_code == 402 and response["Content-Type"].startswith("application/json")
    assert stored(org_a) == {"conversations": [], "messages": [], "runs": []}


@pytest.mark.parametrize("usage", [True, False])
def test_a_streamed_round_reports_only_the_usage_the_gateways_stream_gave(funded, upstream, usage):
    upstream.script(Reply(content="streamed", chunk_size=3, usage=usage, prompt_tokens=8, completion_tokens=2))

    *_, (event, data) = frames(chat(funded, {"messages": user("hi"), "stream": True}))

    assert event == "chat" and upstream.chat_requests[0]["stream"] is True
    assert (data["run"].get("promptTokens"), data["run"].get("completionTokens")) == ((8, 2) if usage else (None, None))
