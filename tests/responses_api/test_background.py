"""Background responses with the official `openai` SDK: accepted at once, executed by a django-q2
worker, retrieved while they run, their kept stream resumed with `starting_after`, cancelled (the
run's stop) before or while they run — each a run billed once, or not at all when cancelled."""

from __future__ import annotations

import json
import threading

import openai
import pytest

from agents_site.vocabulary import ControlCommand, EventKind, RunStatus
from sessions.models import Event
from tests.responses_api.conftest import FEE_CENTS, debits, event_conforms, stored_runs
from tests.support.qcluster import wait_for
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def finished(client, response_id: str, *, timeout: float = 30.0):
    """Retrieve `response_id` until it is no longer queued or in progress; return it."""
    box = {}

    def done() -> bool:
        box["response"] = client.responses.retrieve(response_id)
        return box["response"].status not in ("queued", "in_progress")

    wait_for(done, timeout=timeout, interval=0.05, message=f"response {response_id} to finish")
    return box["response"]


def test_a_background_response_is_accepted_at_once_and_executed_by_a_worker(live, org, client, upstream):
    upstream.script(Reply(content="Done later"))

    accepted = client.responses.create(model="writer", input="Later, please", background=True)

    assert accepted.status in ("queued", "in_progress") and accepted.background is True and accepted.output == []
    response = finished(client, accepted.id)
    assert (response.status, response.output_text) == ("completed", "Done later"), live.cluster.log()[-3000:]
    [run] = stored_runs(org)
    assert (run.id, run.status) == (accepted.id, RunStatus.OK)
    assert [d.amount_cents for d in debits(org)] == [-FEE_CENTS]


def test_a_background_stream_is_kept_and_resumes_after_any_sequence_number(live, org, client, upstream):
    upstream.script(Reply(content="alpha beta gamma", chunk_size=6))

    events = list(client.responses.create(model="writer", input="stream it", background=True, stream=True))

    types = [event.type for event in events]
    assert types[:3] == ["response.created", "response.queued", "response.in_progress"]
    assert types[-1] == "response.completed" and events[-1].response.output_text == "alpha beta gamma"
    assert [event.sequence_number for event in events] == list(range(len(events)))
    for event in events:
        event_conforms(event.model_dump(mode="json", exclude_unset=True))

    resumed = list(client.responses.retrieve(events[-1].response.id, stream=True, starting_after=3))

    assert [e.model_dump(mode="json") for e in resumed] == [e.model_dump(mode="json") for e in events[4:]]
    assert [d.amount_cents for d in debits(org)] == [-FEE_CENTS]


def test_resuming_past_the_head_is_refused_and_a_deleted_responses_stream_is_gone(live, org, client, upstream):
    upstream.script(Reply(content="short"))
    response = finished(client, client.responses.create(model="writer", input="x", background=True).id)
    head = len(list(client.responses.retrieve(response.id, stream=True))) - 1

    with pytest.raises(openai.BadRequestError) as past:
        client.responses.retrieve(response.id, stream=True, starting_after=head + 1)
    assert past.value.body["param"] == "starting_after"

    client.responses.delete(response.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(response.id, stream=True, starting_after=0)


def test_cancel_stops_a_running_response_and_it_is_not_billed(live, org, client, upstream):
    released = threading.Event()
    upstream.script(Reply(hold=released, content="too late"))
    accepted = client.responses.create(model="writer", input="take your time", background=True)
    wait_for(lambda: upstream.chat_requests, timeout=30, message=f"the worker to call the model\n{live.cluster.log()[-2000:]}")
    answer = {}
    canceller = threading.Thread(target=lambda: answer.setdefault("response", client.responses.cancel(accepted.id)))
    canceller.start()
    try:
        # The stop is recorded in the run's session; the worker honours it when the model answers.
        wait_for(lambda: _stop_recorded(org, stored_runs(org)[0].session_id), timeout=10, message="the stop")
    finally:
        released.set()
        canceller.join(timeout=30)

    assert answer["response"].status == "cancelled"
    assert finished(client, accepted.id).status == "cancelled"
    [run] = stored_runs(org)
    assert (run.status, run.finish_reason) == (RunStatus.ERROR, "stopped")
    assert debits(org) == []
    events = list(client.responses.retrieve(accepted.id, stream=True))
    assert events[-1].type == "error" and events[-1].code == "response_cancelled"


def test_cancel_before_a_worker_took_it_ends_it_unstarted(live, org, client, upstream):
    released = threading.Event()
    upstream.script(Reply(hold=released, content="first"), Reply(content="second"))
    busy = client.responses.create(model="writer", input="occupy the worker", background=True)
    try:
        wait_for(lambda: upstream.chat_requests, timeout=30, message="the worker to be busy")
        waiting = client.responses.create(model="writer", input="wait your turn", background=True)
        assert waiting.status == "queued"  # one worker, busy

        cancelled = client.responses.cancel(waiting.id)
    finally:
        released.set()

    assert cancelled.status == "cancelled"
    assert finished(client, busy.id).status == "completed"
    runs = {run.id: run for run in stored_runs(org)}
    assert runs[waiting.id].error.startswith("cancelled before start")
    assert len(upstream.chat_requests) == 1  # the cancelled one never reached the model
    assert [d.amount_cents for d in debits(org)] == [-FEE_CENTS]
    assert [e.type for e in client.responses.retrieve(waiting.id, stream=True)][-1] == "error"


def test_only_a_background_response_is_cancelled(live, org, client, upstream):
    upstream.script(Reply(content="now"))
    response = client.responses.create(model="writer", input="now")

    with pytest.raises(openai.BadRequestError) as refused:
        client.responses.cancel(response.id)
    assert refused.value.body["param"] == "response_id"
    with pytest.raises(openai.BadRequestError) as no_stream:
        client.responses.retrieve(response.id, stream=True)
    assert no_stream.value.body["param"] == "stream"


def _stop_recorded(org, session_id: str) -> bool:
    with org.context():
        return any(json.loads(e.payload or "{}").get("command") == ControlCommand.STOP
                   for e in Event.objects.filter(session_id=session_id, kind=EventKind.CONTROL))
