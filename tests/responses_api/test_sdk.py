"""The official `openai` SDK's `client.responses` against a real daphne: create (plain and streamed),
retrieve, delete, input items, threads, the caller's function tools, text formats, length cuts —
each response a recorded, billed run, every body and event valid by OpenAI's own OpenAPI document."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from agents_site.vocabulary import RunKind, RunStatus
from chat.models import Message
from responses_api.models import StoredResponse
from tests.responses_api.conftest import BASE_PATH, FEE_CENTS, conforms, debits, event_conforms, sse_events, stored_runs
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]

WEATHER = {"type": "function", "name": "get_weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def raw(live, org, method: str, path: str, **kwargs) -> httpx.Response:
    return httpx.request(method, live.url + BASE_PATH + path, headers={"Authorization": f"Bearer {org.key}"}, timeout=60,
                         **kwargs)


def test_create_answers_a_completed_response_recorded_as_one_billed_run(live, org, client, upstream):
    upstream.script(Reply(content="Hello there"))

    response = client.responses.create(model="writer", input="Say hello", metadata={"ticket": "T-1"})

    assert response.status == "completed"
    assert response.output_text == "Hello there"
    assert response.model == "writer"
    assert response.metadata == {"ticket": "T-1"}
    assert response.usage.input_tokens == 11 and response.usage.output_tokens == 7
    assert "stream" not in upstream.chat_requests[0] and upstream.streams == []  # answered whole: asked not streamed (decision 1534)
    [run] = stored_runs(org)
    assert (run.id, run.kind, run.status, run.input, run.output) == (response.id, RunKind.RESPONSES, RunStatus.OK,
                                                                      "Say hello", "Hello there")
    assert [d.amount_cents for d in debits(org)] == [-FEE_CENTS]
    assert upstream.chat_requests[0]["messages"] == [{"role": "system", "content": "Be brief."},
                                                     {"role": "user", "content": "Say hello"}]
    body = raw(live, org, "GET", f"/responses/{response.id}").json()
    conforms(body, "Response")
    assert body["metadata"] == {"ticket": "T-1"} and body["output"][0]["content"][0]["text"] == "Hello there"


def test_retrieve_input_items_and_delete_with_the_sdk(live, org, client, upstream):
    upstream.script(Reply(content="Noted"))
    created = client.responses.create(model="writer", input=[
        {"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "second"}]}])

    assert client.responses.retrieve(created.id).output_text == "Noted"
    items = client.responses.input_items.list(created.id, order="asc")
    assert [(i.type, i.role) for i in items.data] == [("message", "user"), ("message", "assistant"), ("message", "user")]
    listed = raw(live, org, "GET", f"/responses/{created.id}/input_items", params={"limit": 2}).json()
    conforms(listed, "ResponseItemList")
    assert listed["has_more"] is True and [i["content"][0]["text"] for i in listed["data"]] == ["second", "ok"]

    client.responses.delete(created.id)

    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.retrieve(created.id)
    assert gone.value.body["param"] == "response_id"
    assert [run.status for run in stored_runs(org)] == [RunStatus.OK]  # the run stays recorded


def test_a_stream_is_typed_events_with_dense_sequence_numbers(live, org, client, upstream):
    upstream.script(Reply(content="one two three", chunk_size=4))

    with client.responses.stream(model="writer", input="count") as stream:
        events = list(stream)
        final = stream.get_final_response()

    types = [event.type for event in events]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.completed"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == "one two three"
    assert final.output_text == "one two three" and final.status == "completed"
    assert client.responses.retrieve(final.id).output[0].id == final.output[0].id  # the stream's ids are the stored ones
    assert [d.amount_cents for d in debits(org)] == [-FEE_CENTS]

    upstream.script(Reply(content="again", chunk_size=2))
    with raw_stream(live, org, {"model": "writer", "input": "again", "stream": True}) as text:
        for event in sse_events(text):
            event_conforms(event)


class raw_stream:
    """`with raw_stream(live, org, body) as text:` the whole event stream of one create, as text."""

    def __init__(self, live, org, body: dict) -> None:
        self.response = raw(live, org, "POST", "/responses", json=body)

    def __enter__(self) -> str:
        assert self.response.status_code == 200, self.response.text
        assert self.response.headers["content-type"].startswith("text/event-stream")
        return self.response.text

    def __exit__(self, *exc) -> None:
        return None


def test_previous_response_id_continues_the_thread_in_one_conversation(live, org, client, upstream):
    upstream.script(Reply(content="Hi Ann"), Reply(content="Your name is Ann"))

    first = client.responses.create(model="writer", input="My name is Ann")
    second = client.responses.create(model="writer", input="What is my name?", previous_response_id=first.id,
                                     instructions="Answer in one line.")

    assert second.previous_response_id == first.id
    assert second.conversation.id == first.conversation.id
    assert upstream.chat_requests[1]["messages"] == [
        {"role": "system", "content": "Be brief.\n\nAnswer in one line."}, {"role": "user", "content": "My name is Ann"},
        {"role": "assistant", "content": "Hi Ann"}, {"role": "user", "content": "What is my name?"}]
    with org.context():  # the console's chat shows the thread
        turns = list(Message.objects.filter(conversation_id=first.conversation.id).values_list("role", "content"))
    assert turns == [("user", "My name is Ann"), ("assistant", "Hi Ann"), ("user", "What is my name?"),
                     ("assistant", "Your name is Ann")]

    upstream.script(Reply(content="Still Ann"))
    third = client.responses.create(model="writer", input="And now?", conversation=first.conversation.id)
    assert third.conversation.id == first.conversation.id
    assert [m["content"] for m in upstream.chat_requests[2]["messages"][1:]] == [
        "My name is Ann", "Hi Ann", "What is my name?", "Your name is Ann", "And now?"]


def test_function_tools_round_trip_as_function_call_items(live, org, client, upstream):
    upstream.script(Reply(content=None, tool_calls=[("get_weather", {"city": "Paris"})]), Reply(content="It is sunny"))

    asked = client.responses.create(model="writer", input="Weather in Paris?", tools=[WEATHER], tool_choice="auto")

    [call] = asked.output
    assert (call.type, call.name, json.loads(call.arguments), call.status) == ("function_call", "get_weather",
                                                                               {"city": "Paris"}, "completed")
    assert upstream.chat_requests[0]["tools"][0]["function"]["name"] == "get_weather"
    answered = client.responses.create(model="writer", previous_response_id=asked.id, tools=[WEATHER],
                                       input=[{"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])

    assert answered.output_text == "It is sunny"
    sent = upstream.chat_requests[1]["messages"]
    assert sent[-2]["tool_calls"][0]["id"] == call.call_id and sent[-2]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert sent[-1] == {"role": "tool", "tool_call_id": call.call_id, "content": "sunny"}
    assert [d.amount_cents for d in debits(org)] == [-FEE_CENTS, -FEE_CENTS]


def test_text_format_and_generation_settings_reach_the_gateway(live, org, client, upstream):
    upstream.script(Reply(content='{"answer": 4}'))
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"],
              "additionalProperties": False}

    response = client.responses.create(model="writer", input="2+2", temperature=0.2, top_p=0.5, max_output_tokens=50,
                                       text={"format": {"type": "json_schema", "name": "sum", "schema": schema, "strict": True}})

    sent = upstream.chat_requests[0]
    assert sent["response_format"] == {"type": "json_schema", "json_schema": {"name": "sum", "schema": schema, "strict": True}}
    assert (sent["temperature"], sent["top_p"]) == (0.2, 0.5)
    assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 50
    assert json.loads(response.output_text) == {"answer": 4}
    assert response.text.format.type == "json_schema" and response.max_output_tokens == 50


def test_a_reply_cut_at_max_output_tokens_is_incomplete(live, org, client, upstream):
    upstream.script(Reply(content="This is cut", finish="length"))

    response = client.responses.create(model="writer", input="Write a lot", max_output_tokens=3)

    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    assert response.output[0].status == "incomplete" and response.output_text == "This is cut"
    conforms(raw(live, org, "GET", f"/responses/{response.id}").json(), "Response")


def test_store_false_keeps_the_run_but_no_response(live, org, client, upstream):
    upstream.script(Reply(content="Gone"))

    response = client.responses.create(model="writer", input="ephemeral", store=False)

    assert response.output_text == "Gone" and response.store is False
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id)
    with org.context():
        assert not StoredResponse.objects.exists() and not Message.objects.exists()
    assert [run.status for run in stored_runs(org)] == [RunStatus.OK]
