"""`a2a-sdk`'s own client talks to a platform agent on a real daphne: the card at the well-known
address, SendMessage (blocking, streamed, returnImmediately), GetTask, CancelTask, and contextId
continuing a conversation; each task a recorded, billed run of kind `a2a`."""

from __future__ import annotations

import threading

import httpx
import pytest
from a2a.client import A2ACardResolver
from a2a.types import a2a_pb2 as a2a
from a2a.utils.errors import A2AError, TaskNotCancelableError

from chat.models import Message as Turn
from tests.a2a_server.conftest import FEE_CENTS, debits, endpoint, run, sdk_client, stored_runs, task_when, user_message
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def test_the_card_names_the_agent_its_skills_the_bearer_scheme_and_its_interface(live, org):
    async def go():
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {org.key}"}, timeout=60) as http:
            return await A2ACardResolver(http, base_url=endpoint(live)).get_agent_card()

    card = run(go())

    assert (card.name, card.description) == ("writer", "Writes short answers")
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (f"{live.url}/v1/agents/writer/a2a", "JSONRPC", "1.0"), (f"{live.url}/v1/agents/writer/a2a", "JSONRPC", "0.3")]
    assert [s.id for s in card.skills] == ["calculator"] and card.skills[0].description
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert [list(r.schemes) for r in card.security_requirements] == [["bearer"]]
    assert card.capabilities.streaming and not card.capabilities.push_notifications
    assert card.provider.organization == org.slug


def test_send_message_runs_the_agent_as_a_recorded_billed_task(live, org, upstream):
    upstream.script(Reply(content="Four.", prompt_tokens=5, completion_tokens=2))

    async def go():
        async with sdk_client(live, org.key) as client:
            return [event async for event in client.send_message(a2a.SendMessageRequest(message=user_message("2+2?")))]

    [event] = run(go())

    task = event.task
    assert task.status.state == a2a.TaskState.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["Four."]
    assert [(m.role, m.parts[0].text) for m in task.history] == [(a2a.Role.ROLE_USER, "2+2?"), (a2a.Role.ROLE_AGENT, "Four.")]
    [stored] = stored_runs(org)
    assert (stored.id, stored.kind, stored.status, stored.input, stored.output) == (task.id, "a2a", "ok", "2+2?", "Four.")
    assert stored.session_id and task.metadata["sessionId"] == stored.session_id
    assert [(d.run_id, d.amount_cents) for d in debits(org)] == [(stored.id, -FEE_CENTS)]
    with org.context():  # the task's context is a conversation of the org, holding both turns
        assert [(t.conversation_id, t.role, t.content) for t in Turn.objects.order_by("position")] == [
            (task.context_id, "user", "2+2?"), (task.context_id, "assistant", "Four.")]
    assert upstream.chat_requests[-1]["messages"][0] == {"role": "system", "content": "Be brief."}


def test_context_id_continues_the_conversation(live, org, upstream):
    upstream.script(Reply(content="Hello Ada."), Reply(content="Your name is Ada."))

    async def go():
        async with sdk_client(live, org.key) as client:
            [first] = [e async for e in client.send_message(a2a.SendMessageRequest(message=user_message("I am Ada")))]
            second_message = user_message("Who am I?", context_id=first.task.context_id, message_id="m-2")
            [second] = [e async for e in client.send_message(a2a.SendMessageRequest(message=second_message))]
            return first.task, second.task

    first, second = run(go())

    assert second.context_id == first.context_id and second.id != first.id
    assert upstream.chat_requests[-1]["messages"][1:] == [
        {"role": "user", "content": "I am Ada"}, {"role": "assistant", "content": "Hello Ada."}, {"role": "user", "content": "Who am I?"}]
    assert second.artifacts[0].parts[0].text == "Your name is Ada."


def test_streaming_sends_the_task_the_reply_in_pieces_and_the_final_state(live, org, upstream):
    upstream.script(Reply(content="Once upon a time."))

    async def go():
        async with sdk_client(live, org.key, streaming=True) as client:
            return [e async for e in client.send_message(a2a.SendMessageRequest(message=user_message("A story")))]

    events = run(go())

    assert events[0].HasField("task") and events[0].task.status.state == a2a.TaskState.TASK_STATE_WORKING
    pieces = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert "".join(p.text for u in pieces for p in u.artifact.parts) == "Once upon a time."
    assert pieces[-1].last_chunk and not pieces[0].append and all(u.append for u in pieces[1:])
    assert events[-1].HasField("status_update") and events[-1].status_update.status.state == a2a.TaskState.TASK_STATE_COMPLETED
    [stored] = stored_runs(org)
    assert (stored.kind, stored.status, stored.output, stored.id) == ("a2a", "ok", "Once upon a time.", events[0].task.id)


def test_get_task_resolves_the_run_and_return_immediately_answers_at_once(live, org, upstream):
    upstream.script(Reply(content="done later"))

    async def go():
        async with sdk_client(live, org.key) as client:
            request = a2a.SendMessageRequest(message=user_message("work"), configuration=a2a.SendMessageConfiguration(return_immediately=True))
            [started] = [e async for e in client.send_message(request)]
            return started.task, await task_when(client, started.task.id, a2a.TaskState.TASK_STATE_COMPLETED)

    started, finished = run(go())

    assert started.status.state in (a2a.TaskState.TASK_STATE_WORKING, a2a.TaskState.TASK_STATE_COMPLETED)
    assert finished.id == started.id and finished.artifacts[0].parts[0].text == "done later"


def test_cancel_task_stops_the_run_and_the_task_ends_canceled_unbilled(live, org, upstream):
    hold = threading.Event()
    upstream.script(Reply(content="too late", hold=hold))

    async def go():
        async with sdk_client(live, org.key) as client:
            request = a2a.SendMessageRequest(message=user_message("slow"), configuration=a2a.SendMessageConfiguration(return_immediately=True))
            [started] = [e async for e in client.send_message(request)]
            canceled = await client.cancel_task(a2a.CancelTaskRequest(id=started.task.id))
            again = None
            try:
                await client.cancel_task(a2a.CancelTaskRequest(id=started.task.id))
            except A2AError as exc:
                again = exc
            return started.task, canceled, again

    try:
        started, canceled, again = run(go())
    finally:
        hold.set()

    assert canceled.id == started.id and canceled.status.state == a2a.TaskState.TASK_STATE_CANCELED
    assert isinstance(again, TaskNotCancelableError)
    [stored] = stored_runs(org)
    assert (stored.status, stored.finish_reason) == ("error", "stopped")
    assert debits(org) == []
