"""The Responses API routes under `/v1/agents/openai/v1/` (plain Django views, as the chat completions').

* `POST   …/responses` → a `response` (200), or with `"stream": true` a `text/event-stream` of
  typed events (`event: <type>` / `data: {type, sequence_number, …}`); with `"background": true`
  the `response` at once (`queued`), a worker executes it;
* `GET    …/responses/{id}` → the `response`; with `?stream=true[&starting_after=N]` the kept
  events of a background response after N, then the live ones until it ends;
* `DELETE …/responses/{id}` → `{id, object: "response.deleted", deleted: true}`;
* `POST   …/responses/{id}/cancel` → the background `response`, stopped;
* `GET    …/responses/{id}/input_items` → OpenAI's `list` of its input items (`limit`, `order`, `after`).

Auth and errors are the chat completions endpoint's (`openai_api.views`): an API key of the org
as `Authorization: Bearer …` (else 401), and every error OpenAI's error object. Another org's
response is the same 404 as an unknown one.
"""

from __future__ import annotations

import asyncio
import logging
import time

from django.conf import settings
from django.http import JsonResponse

from agents_site.vocabulary import ReplyFrame, RunStatus
from openai_api.errors import InvalidParam, error_answer, stream_error_event
from openai_api.views import InternalError, _request_id, openai_view, principal_of, refuse_credentials_in_query
from openai_api.wire import parse_body
from responses_api import selectors, services, wire
from responses_api.errors import ResponseNotFound
from responses_api.models import StoredResponse
from runs.streaming import QueueListener, answer_later, render_frame, run_stream, stream_response
from sessions.stream import read_store

logger = logging.getLogger(__name__)

#: Seconds between two reads of a resumed stream's kept events.
POLL_SECONDS = 0.1
#: How long a cancel waits for a running response to stop before it answers (seconds).
CANCEL_WAIT_SECONDS = 5.0
MAX_PAGE = 100


def _headers(response, run) -> None:
    response["X-Agents-Run-Id"] = run.id
    response["X-Agents-Session-Id"] = run.session_id or ""


@openai_view("POST")
def responses(request):
    """`POST …/responses`: run the agent named as `model` on the input; see the module doc.

    200 `response` (a failed run is a `response` with `status: failed` and its `error`, as OpenAI
    answers); 400 bad input naming `param`; 401; 402 balance; 404 `model_not_found` or an unknown
    `previous_response_id` / `conversation`; 409 `agent_external` / `conversation_busy`; 422
    `secret_in_transcript`; 503 no gateway.
    """
    principal = principal_of(request)
    refuse_credentials_in_query(request)
    checked = wire.response_request(parse_body(request.body))
    started = services.response_start(principal=principal, request=checked, request_id=_request_id(request))
    org = principal.org_slug
    if checked.background:
        if checked.stream:
            response = stream_response(_kept_frames(org=org, response_id=started.run.id, after=-1))
        else:
            response = JsonResponse(started.body())
        _headers(response, started.run)
        return response
    if checked.stream:
        response = _stream(started, org=org)
        _headers(response, started.run)
        return response

    def answer():
        run = yield from services.response_steps(started)
        response = JsonResponse(services.record_body(started.record, run))
        _headers(response, run)
        return response

    return answer_later(org=org, work=answer, on_error=_error_answer)


def _error_answer(exc: Exception):
    """Render what a deferred response raised as OpenAI's error object (as `openai_view` does)."""
    return error_answer(exc, fault_log="a response failed unexpectedly")


def _stream(started: services.StartedResponse, *, org: str):
    """Answer a started response as its typed events while its run executes (not kept: no resume)."""

    def frame(event, data) -> str | None:
        if event == "event":
            return render_frame(data["type"], data)
        if event == ReplyFrame.ERROR:
            return render_frame("error", stream_error_event(InternalError(data.get("error") or None)))
        return None

    def work(listener: QueueListener):
        writer = wire.EventWriter(emit=lambda event: listener.put("event", event))
        body = started.body()
        writer.lifecycle("response.created", body)
        writer.lifecycle("response.in_progress", body)
        yield from services.response_steps(started, writer=writer)
        return None, None

    return run_stream(org=org, work=work, frame=frame)


async def _kept_frames(*, org: str, response_id: str, after: int):
    """Yield a background response's kept events after `after`, then the new ones as they are kept,
    until its closing event; `: ping` while idle. Ends early when the response is deleted."""
    last = after
    ping_every = max(float(getattr(settings, "AGENTS_SSE_PING_SECONDS", 25)), 0.05)
    idle_since = time.monotonic()
    while True:
        events, state = await read_store(org, _read_events, response_id=response_id, after=last)
        for event in events:
            yield render_frame(event["type"], event)
            last = event["sequence_number"]
            if event["type"] in services.CLOSING_EVENTS:
                return
        if state == "gone":
            return
        if state == "finished" and not events:
            await read_store(org, _close_if_open, response_id=response_id)
        if events:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= ping_every:
            idle_since = time.monotonic()
            yield ": ping\n\n"
        await asyncio.sleep(POLL_SECONDS)


def _read_events(*, response_id: str, after: int) -> tuple[list[dict], str]:
    """Return the kept events after `after` and the response's state: `running`, `finished` or `gone`."""
    events = selectors.events_after(response_id=response_id, after=after)
    record = StoredResponse.objects.filter(pk=response_id).first()
    if record is None:
        return events, "gone"
    run = selectors.response_run(record=record)
    if run is None:
        return events, "gone"
    return events, "finished" if run.status in RunStatus.FINISHED else "running"


def _close_if_open(*, response_id: str) -> None:
    """Keep the closing event of a finished response whose stream was never closed (a stop before start)."""
    record = StoredResponse.objects.filter(pk=response_id).first()
    if record is not None:
        services._close_unstarted(record, response_id)


@openai_view("GET", "DELETE")
def response(request, response_id: str):
    """`GET …/responses/{id}` (with `stream=true`, resume a background response's events after
    `starting_after`) and `DELETE …/responses/{id}`; 404 for an unknown or another org's id."""
    principal = principal_of(request)
    if request.method == "DELETE":
        record = selectors.response_get(response_id=response_id, principal=principal)
        services.response_delete(record=record)
        return JsonResponse({"id": record.id, "object": "response.deleted", "deleted": True})
    stream = _flag(request.GET.get("stream"), "stream")
    starting_after = request.GET.get("starting_after")
    for name in request.GET:
        if name not in ("stream", "starting_after", "include", "include_obfuscation"):
            raise InvalidParam(f"the query parameter '{name}' is not supported", param=name)
    if request.GET.getlist("include"):
        raise InvalidParam("'include' is not supported: no hosted tool, reasoning or log-probability output is served here",
                           param="include")
    refuse_credentials_in_query(request)
    record = selectors.response_get(response_id=response_id, principal=principal)
    run = selectors.response_run(record=record)
    if run is None:
        raise ResponseNotFound(response_id)
    if not stream:
        if starting_after is not None:
            raise InvalidParam("'starting_after' resumes a stream: give it with stream=true", param="starting_after")
        return JsonResponse(services.record_body(record, run))
    if not record.background:
        raise InvalidParam("only a background response's stream is kept: create it with \"background\": true to resume "
                           "its stream", param="stream")
    after = -1
    if starting_after is not None:
        try:
            after = int(starting_after)
        except ValueError:
            raise InvalidParam("'starting_after' must be an integer (a sequence_number)", param="starting_after") from None
        head = selectors.events_head(response_id=record.id)
        if after < -1 or after > head:
            raise InvalidParam(f"'starting_after' {after} is past the stream's last event (sequence_number {head})",
                               param="starting_after")
    response = stream_response(_kept_frames(org=principal.org_slug, response_id=record.id, after=after))
    _headers(response, run)
    return response


def _flag(value: str | None, name: str) -> bool:
    if value is None:
        return False
    if value.lower() in ("true", "1"):
        return True
    if value.lower() in ("false", "0"):
        return False
    raise InvalidParam(f"'{name}' must be true or false", param=name)


@openai_view("POST")
def response_cancel(request, response_id: str):
    """`POST …/responses/{id}/cancel`: stop a background response; answer it (`cancelled` once the
    stop landed, waiting at most `CANCEL_WAIT_SECONDS`). 400 for a response not created with
    `background: true`; a finished one is answered as it is."""
    principal = principal_of(request)
    refuse_credentials_in_query(request)
    record = selectors.response_get(response_id=response_id, principal=principal)
    if not record.background:
        raise InvalidParam("only a background response can be cancelled", param="response_id")
    services.response_cancel(record=record, actor=principal.actor)
    deadline = time.monotonic() + CANCEL_WAIT_SECONDS
    run = selectors.response_run(record=record)
    while run is not None and run.status not in RunStatus.FINISHED and time.monotonic() < deadline:
        time.sleep(0.05)  # the executor ends the run between two steps; a stop is never lost, only this answer waits
        run = selectors.response_run(record=record)
    if run is None:
        raise ResponseNotFound(response_id)
    record.refresh_from_db()
    return JsonResponse(services.record_body(record, run))


@openai_view("GET")
def response_input_items(request, response_id: str):
    """`GET …/responses/{id}/input_items`: the response's input items, `order` desc (default) or
    asc, `limit` 1–100 (20), `after` an item id; OpenAI's `list` (`data`, `first_id`, `last_id`, `has_more`)."""
    principal = principal_of(request)
    for name in request.GET:
        if name not in ("limit", "order", "after", "include"):
            raise InvalidParam(f"the query parameter '{name}' is not supported", param=name)
    refuse_credentials_in_query(request)
    limit_text = request.GET.get("limit", "20")
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_PAGE:
        raise InvalidParam(f"'limit' must be an integer from 1 to {MAX_PAGE}", param="limit")
    order = request.GET.get("order", "desc")
    if order not in ("asc", "desc"):
        raise InvalidParam("'order' must be asc or desc", param="order")
    record = selectors.response_get(response_id=response_id, principal=principal)
    page = wire.input_items_page(record.input_items, limit=int(limit_text), order=order, after=request.GET.get("after"))
    return JsonResponse(page)
