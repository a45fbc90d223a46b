"""Every frame of a streamed reply matches the schema the OpenAPI document declares for it (issue 29 item 8).

The document publishes each stream as its own component (`ChatStreamFrame` for POST
/v1/agents/chat, `RunStreamFrame` for POST /v1/agents/{ref}/run): a `oneOf` of frames, each an
`event` word and the JSON Schema of its `data` (`contentSchema`). These tests stream real
rounds and runs against the loopback model — with a tool executed here, client calls handed
back, a failed round — and validate each frame's decoded data against the branch its event
names. A frame whose event the document does not declare, or whose data the schema refuses,
fails.
"""

from __future__ import annotations

import pytest
from jsonschema import Draft202012Validator

from server.api import api
from tests.runs.test_run_stream import frames_of, post_run
from tests.chat.conftest import chat, fund, user
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)  # the run executes in a worker thread: it must see the committed org


def _frame_schemas(component: str) -> dict[str, Draft202012Validator]:
    """Return `{event: validator of its data}` for the stream component `component` of the document."""
    document = api.get_openapi_schema()
    components = document["components"]
    stream = components["schemas"][component]
    validators = {}
    for branch in stream["oneOf"]:
        event = branch["properties"]["event"]["const"]
        data = branch["properties"]["data"]["contentSchema"]
        validators[event] = Draft202012Validator({**data, "components": components})
    return validators


def _check(component: str, frames: list[tuple[str | None, object]]) -> list[str]:
    """Validate every frame against its declared schema; return the events in order."""
    validators = _frame_schemas(component)
    for event, data in frames:
        assert event in validators, f"{component} declares no `{event}` frame"
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validators[event].iter_errors(data)]
        assert errors == [], (event, data, errors)
    return [event for event, _ in frames]


@pytest.fixture
def funded(org_a):
    fund(org_a)
    return org_a


def test_a_streamed_round_with_a_tool_matches_chat_stream_frame(funded, upstream):
    upstream.script(Reply(content=None, tool_calls=[("calculator", {"expression": "2*21"})]),
                    Reply(content="The answer is 42.", chunks=["The ", "answer ", "is 42."]))

    events = _check("ChatStreamFrame", frames_of(chat(funded, {"messages": user("2*21?"), "stream": True})))

    assert events[0] == "start" and "tool" in events and "delta" in events and events[-1] == "chat"


def test_a_streamed_round_handing_back_client_calls_matches_chat_stream_frame(funded, upstream):
    upstream.script(Reply(content=None, tool_calls=[("open_form", {"form": "create_agent"})]))

    events = _check("ChatStreamFrame", frames_of(chat(funded, {"messages": user("new agent"), "preset": "system", "stream": True})))

    assert events == ["start", "ops", "chat"]


def test_a_failed_streamed_round_matches_chat_stream_frame(funded, upstream):
    upstream.script(*[Reply(status=500)] * 3)

    events = _check("ChatStreamFrame", frames_of(chat(funded, {"messages": user("hello?"), "stream": True})))

    assert events == ["start", "error"]


def test_a_streamed_run_with_a_tool_matches_run_stream_frame(funded, upstream):
    from tests.agents.conftest import make_agent

    make_agent(funded, "counter", tools=["calculator"])
    upstream.script(Reply(content=None, tool_calls=[("calculator", {"expression": "6*7"})]),
                    Reply(content="It is 42.", chunks=["It ", "is 42."]))

    events = _check("RunStreamFrame", frames_of(post_run(funded, "counter", {"input": "6*7?", "stream": True})))

    assert events[0] == "start" and "tool" in events and "delta" in events and events[-1] == "run"


def test_a_failed_streamed_run_matches_run_stream_frame(funded, upstream):
    from tests.agents.conftest import make_agent

    make_agent(funded, "flaky")
    upstream.script(Reply(content="first part of the answer", chunk_size=6, fail_after=2))

    events = _check("RunStreamFrame", frames_of(post_run(funded, "flaky", {"input": "go", "stream": True})))

    assert events[0] == "start" and events[-1] == "run"
