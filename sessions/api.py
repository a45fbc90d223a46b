"""Session and builds routes (spec 003: /v1/agents/sessions…, /v1/agents/builds…). Thin: parse, call, shape.

`sessions_router` needs a validated principal acting for an org (the API's default auth);
its org is the only org these routes touch. `builds_router` is public (auth=None) and takes
the org from the path, the one address where it may.
"""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from django.http import JsonResponse
from ninja import Query, Router, Status

from agents_site import permissions
from agents_site.errors import InvalidRequest
from agents_site.pagination import cursor_param, limit_param
from agents_site.schemas import BodySchema, refuse_unknown_fields, scan_caller_text, word_param
from agents_site.vocabulary import ControlCommand, EventKind, SessionStatus
from agents_site.wire import INT64_MAX, INT64_MIN, unstorable_text
from sessions import builds, control, hooks, selectors, services
from sessions.presenters import control_command_view, event_view, session_view, tree_view
from sessions.schemas import (
    BuildOut,
    BuildsOut,
    ControlIn,
    ControlMessageIn,
    ControlOut,
    ControlPollOut,
    ErrorOut,
    EventBatchOut,
    EventIn,
    EventListOut,
    EventOut,
    SecretErrorOut,
    SessionDetailOut,
    SessionIn,
    SessionListOut,
    SessionOut,
    SessionPatchIn,
    StopIn,
    TreeNodeOut,
)
from sessions.stream import parse_last_event_id, read_store, resolve_root, stream_response

sessions_router = Router(tags=["sessions"])
builds_router = Router(tags=["builds"], auth=None)


def _json_body(request, *, required: bool) -> dict:
    """Return the request body as a JSON object ({} for an empty optional body); else 400."""
    if not request.body:
        if required:
            raise InvalidRequest("a JSON body is required")
        return {}
    try:
        body = json.loads(request.body)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested deeper than the reader goes
        raise InvalidRequest("payload must be valid JSON") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("the body must be a JSON object")
    refusal = unstorable_text(body)  # before any scan: a lone surrogate is no text to scan
    if refusal is not None:
        raise refusal
    return body


def _openapi_body(schema, *, required: bool = False) -> dict:
    """Declare `schema` as the JSON body of a route that reads its raw body itself."""
    return {"requestBody": {"content": {"application/json": {"schema": schema.model_json_schema()}}, "required": required}}


_SSE = {"200": {"description": "A stream of Server-Sent Events", "content": {"text/event-stream": {"schema": {"type": "string"}}}}}

# Route docstrings are the operation descriptions of the OpenAPI document: written for the
# API's users. Each route's spec 003 section is named in a comment above it.


# spec 003: GET /v1/agents/sessions/stream
@sessions_router.get("/stream", summary="Live session and event updates (Server-Sent Events)", response={200: None}, openapi_extra={"responses": _SSE})
async def stream_sessions(request, root: str | None = None, lastEventId: str | None = None):
    """Stream the org's session and event frames as Server-Sent Events.

    Frames: `event: session` (`{"session": …}`, no id) and `event: event` (`{"event": …}`,
    `id:` the event's org-wide position); `: ping` comments keep the connection open.
    Reconnect with `Last-Event-ID` (or `?lastEventId=`) to be replayed every event after that
    id, with no gap and no duplicate. An id beyond the log's head (a log restored from a backup
    or reset, or an id this server never sent) is never ignored in silence: the stream opens
    with `event: reset`, `id: <head>`, `data: {"head": <head>}` and continues live from the
    head; re-read sessions and events with the GET routes, as after any drop. `?root=`
    narrows the stream to one flow. A non-numeric Last-Event-ID is a 400.

    While a run's reply is being written, `event: delta` frames
    (`{"sessionId", "runId", "text"}`, credentials masked, no `id:`) carry it piece by piece.
    They are ephemeral: never stored and never replayed on resume; the `message` event that
    follows holds the whole reply.
    """
    org = request.auth.org_slug
    last_event_id = parse_last_event_id(request.headers.get("Last-Event-ID"), lastEventId)
    root_id = await read_store(org, resolve_root, session_id=root) if root else None
    # Hand back the connections this request's thread took (the principal's lookup): a stream
    # lasts as long as its client, and a pooled connection kept that long starves every request.
    await sync_to_async(close_old_connections)()
    return stream_response(org=org, root=root_id, last_event_id=last_event_id)


# spec 003: GET /v1/agents/sessions
@sessions_router.get("", response=SessionListOut, summary="List the org's sessions", exclude_none=True)
def list_sessions(
    request,
    root: str | None = None,
    parent: str | None = None,
    status: word_param(SessionStatus) = Query(None),
    project: str | None = None,
    limit: int = limit_param(default=selectors.LIST_DEFAULT_LIMIT, maximum=selectors.LIST_MAX_LIMIT),
    cursor: str = cursor_param(),
):
    """Return one page of the org's sessions, newest first; root sessions only unless `?root=`
    (a whole flow) or `?parent=` (direct children); `nextCursor` reads the next page."""
    org = request.auth.org_slug
    page = selectors.session_list(root=root, parent=parent, status=status, project=project, limit=limit, cursor=cursor)
    return {
        "sessions": [session_view(r.session, org=org, children=r.children, last_event=r.last_event) for r in page.items],
        "nextCursor": page.next_cursor,
    }


# spec 003: POST /v1/agents/sessions
@sessions_router.post("", response={201: SessionOut}, summary="Open a live session", exclude_none=True)
def create_session(request, payload: SessionIn):
    """Open a session in the caller's org → 201; with `parentSessionId` it is a subagent of
    that session."""
    body = payload.model_dump(exclude_none=True)
    session = services.session_create(
        agent=body.get("agent", ""),
        actor=(body.get("actor") or "").strip() or request.auth.actor,  # a blank actor names none: the caller
        title=body.get("title", ""),
        status=body.get("status", SessionStatus.RUNNING),
        parent_session_id=body.get("parentSessionId"),
        task_workflow_id=body.get("taskWorkflowId", ""),
        task_run_id=body.get("taskRunId", ""),
        host=body.get("host", ""),
        cwd=body.get("cwd", ""),
        repo=body.get("repo", ""),
        target=body.get("target", ""),
        terminal=body.get("terminal", ""),
        provider=body.get("provider", ""),
        account=body.get("account", ""),
        project=body.get("project", ""),
        published=body.get("published", False),
    )
    return Status(201, session_view(session, org=request.auth.org_slug))


# spec 003: GET /v1/agents/sessions/{id}
@sessions_router.get("/{id}", response={200: SessionDetailOut}, summary="Read one session", exclude_none=True)
def get_session(request, id: str):
    """Return a session with its direct children and its 50 newest events, oldest first."""
    org = request.auth.org_slug
    detail = selectors.session_detail(session_id=id)
    view = session_view(detail.row.session, org=org, children=detail.row.children, last_event=detail.row.last_event)
    view["childSessions"] = [session_view(r.session, org=org, children=r.children, last_event=r.last_event) for r in detail.children]
    view["recentEvents"] = [event_view(e) for e in detail.recent_events]
    pending = hooks.pending_approvals(detail.row.session.id)
    if pending:  # a `paused` session whose run waits for a person: what to answer (issue 28)
        view["pendingApprovals"] = pending
    return view


# spec 003: PATCH /v1/agents/sessions/{id}
@sessions_router.patch("/{id}", response={200: SessionOut, 409: ErrorOut}, summary="Update a session", exclude_none=True)
def patch_session(request, id: str, payload: SessionPatchIn):
    """Change a session's status, title, target, terminal, project, published flag or working
    directory. 409 `session_finished` when a finished session is given another status."""
    changes = payload.model_dump(exclude_none=True)
    session = services.session_update(session_id=id, **changes)
    return session_view(session, org=request.auth.org_slug, children=selectors.child_count(session_id=session.id))


# spec 003: GET /v1/agents/sessions/{id}/tree
@sessions_router.get("/{id}/tree", response={200: TreeNodeOut}, summary="The subagent flow under a session")
def session_tree(request, id: str):
    """Return the flow rooted at this session; a leaf's `children` is null."""
    session, by_parent = selectors.session_tree(session_id=id)
    return JsonResponse(tree_view(session, org=request.auth.org_slug, by_parent=by_parent))


# spec 003 (and issue 11): GET /v1/agents/sessions/{id}/events
@sessions_router.get("/{id}/events", response=EventListOut, summary="Read a session's log, page by page", exclude_none=True)
def list_events(
    request,
    id: str,
    limit: int = limit_param(default=selectors.EVENTS_DEFAULT_LIMIT, maximum=selectors.EVENTS_MAX_LIMIT),
    cursor: str = cursor_param(),
):
    """Return one page of the session's events, oldest first (by `seq`); follow `nextCursor` to
    read the whole log. `GET /sessions/{id}` shows only the newest 50."""
    page = selectors.session_events(session_id=id, limit=limit, cursor=cursor)
    return {"events": [event_view(e) for e in page.items], "nextCursor": page.next_cursor}


def _turn(item, *, caller: str) -> dict:
    """Return one turn of a request body as `{kind, payload, actor}` (blank actor → the caller)."""
    if not isinstance(item, dict):
        raise InvalidRequest("an event must be a JSON object")
    refuse_unknown_fields(item, EventIn)
    actor = item.get("actor")
    if actor is not None and not isinstance(actor, str):
        raise InvalidRequest("actor must be a string")
    scan_caller_text({"actor": actor})  # the payload is scanned by the service (findings with line numbers)
    kind = item.get("kind")
    if kind == EventKind.APPROVAL:  # a request is the platform's to record, with the run it suspends
        raise InvalidRequest("approval events are recorded by the platform when a run asks; answer them with …/approve or …/deny")
    return {
        "kind": kind if isinstance(kind, str) else "",
        "payload": item.get("payload"),
        "actor": (actor or "").strip() or caller,  # a blank actor names none: the caller
    }


class EventBatchBody(BodySchema):
    """The batch form of POST …/events (read by the route itself; declared by `_append_body`)."""

    events: list


def _append_body() -> dict:
    """The request body of POST …/events: one turn, or `{"events": [...]}` (a body with `events` is a batch)."""
    single = EventIn.model_json_schema()
    batch = {
        "title": "EventBatchIn",
        "description": f"Append 1 to {services.MAX_BATCH_EVENTS} turns at once, all or none, in list order (the body at most 1 MiB).",
        "type": "object",
        "additionalProperties": False,
        "required": ["events"],
        "properties": {"events": {"type": "array", "minItems": 1, "maxItems": services.MAX_BATCH_EVENTS, "items": single}},
    }
    schema = {"oneOf": [{**single, "not": {"required": ["events"]}}, batch]}
    return {"requestBody": {"content": {"application/json": {"schema": schema}}, "required": True}}


@sessions_router.post(
    "/{id}/events",
    response={201: EventOut | EventBatchOut, 409: ErrorOut, 422: SecretErrorOut},
    summary="Append one turn (or a batch of turns) to a session's log",
    exclude_none=True,
    openapi_extra=_append_body(),
)
def append_event(request, id: str):  # spec 003: POST /v1/agents/sessions/{id}/events
    """Append a turn → 201 with the stored event and its `seq`. 409 `session_finished` on a
    finished session; 422 `secret_in_transcript` with findings when the payload carries a
    credential (nothing is stored).

    A body `{"events": [turn, …]}` (1 to 500 turns, at most 1 MiB) appends them all or none, in
    list order with consecutive `seq`s → 201 `{"events": [event, …]}`. Each turn is checked as a
    single one: the first invalid turn answers 400 naming it (`index`, and `events[i]: ` before
    the message); a credential in any turn refuses the whole batch with 422, each finding
    carrying the `index` of its turn. Nothing is stored on any refusal.
    """
    body = _json_body(request, required=True)
    caller = request.auth.actor
    if "events" in body:
        refuse_unknown_fields(body, EventBatchBody)
        items = body["events"]
        if not isinstance(items, list) or not 1 <= len(items) <= services.MAX_BATCH_EVENTS:
            raise InvalidRequest(services.BATCH_SIZE_MESSAGE)
        turns = []
        for index, item in enumerate(items):
            with services.at_index(index):
                turns.append(_turn(item, caller=caller))
        events = services.session_append_events(session_id=id, events=turns)
        return Status(201, {"events": [event_view(e) for e in events]})
    event = services.session_append_event(session_id=id, **_turn(body, caller=caller))
    return Status(201, event_view(event))


# spec 003: GET /v1/agents/sessions/{id}/control
@sessions_router.get("/{id}/control", response={200: ControlPollOut}, summary="Steering commands after a cursor", exclude_none=True)
def poll_control(request, id: str, after: int | None = Query(None, ge=INT64_MIN, le=INT64_MAX,
                                                             description="Commands with a seq above this (absent or negative: from the start).")):
    """Return the control commands with `seq` > `after`, oldest first, at most 200, and the
    cursor to poll from next."""
    events, cursor = selectors.control_commands(session_id=id, after=after)
    return {"commands": [control_command_view(e) for e in events], "cursor": cursor}


def _steer(request, id: str, command: str):
    body = _json_body(request, required=False)
    refuse_unknown_fields(body, StopIn if command == ControlCommand.STOP else ControlIn)  # `push` is a stop's only
    push = body.get("push")
    if push is not None and not isinstance(push, bool):
        raise InvalidRequest("push must be true or false")
    event, forwarded = control.control_send(
        session_id=id, command=command, message=body.get("message"), payload=body.get("payload"), actor=request.auth.actor,
        push=bool(push), owner_rule=permissions.owner_rule(request.auth),
    )
    return {"command": command, "event": event_view(event), "forwarded": forwarded}


_STEER_RESPONSES = {200: ControlOut, 409: ErrorOut, 422: SecretErrorOut, 502: ErrorOut}
_STOP_RESPONSES = {200: ControlOut, 409: ErrorOut, 422: SecretErrorOut}  # a stop never waits for an ack: no 502



@sessions_router.post("/{id}/pause", response=_STEER_RESPONSES, summary="Ask a running session to pause", exclude_none=True, openapi_extra=_openapi_body(ControlIn))
def pause_session(request, id: str):  # spec 003: POST /v1/agents/sessions/{id}/pause
    """Ask the session to pause before its next step.

    Answers `{command, event, forwarded}`: the recorded command, and whether a running executor
    took it. 409 `session_finished` on a finished session; 422 when the payload carries a
    credential; 502 `forward_failed` when the executor did not acknowledge (the command stays
    recorded).
    """
    return _steer(request, id, ControlCommand.PAUSE)


@sessions_router.post("/{id}/resume", response=_STEER_RESPONSES, summary="Ask a paused session to carry on", exclude_none=True, openapi_extra=_openapi_body(ControlIn))
def resume_session(request, id: str):  # spec 003: POST /v1/agents/sessions/{id}/resume
    """Ask a paused session to carry on.

    Answers `{command, event, forwarded}`: the recorded command, and whether a running executor
    took it. 409 `session_finished` on a finished session; 422 when the payload carries a
    credential; 502 `forward_failed` when the executor did not acknowledge (the command stays
    recorded).
    """
    return _steer(request, id, ControlCommand.RESUME)


@sessions_router.post("/{id}/stop", response=_STOP_RESPONSES, summary="Ask a session to stop for good", exclude_none=True, openapi_extra=_openapi_body(StopIn))
def stop_session(request, id: str):  # spec 003: POST /v1/agents/sessions/{id}/stop
    """Ask the session to stop for good: the run's model call, command or child run in flight is
    interrupted at once; `{"push": true}` lets a stopped coding run push the commits it made.

    Answers 200 `{command, event, forwarded}` as soon as the stop is recorded — never a 502: the
    stop is an intent the run obeys on its own, no acknowledgement is awaited; `forwarded` says
    whether it was handed to a running executor (or its queued run). 409 `session_finished` on a
    finished session; 422 when the payload carries a credential.
    """
    return _steer(request, id, ControlCommand.STOP)


@sessions_router.post("/{id}/message", response=_STEER_RESPONSES, summary="Send text into a running session", exclude_none=True, openapi_extra=_openapi_body(ControlMessageIn, required=True))
def message_session(request, id: str):  # spec 003: POST /v1/agents/sessions/{id}/message
    """Add a user turn (a `message` of at most 16 KiB, and/or a `payload`) before the session's next step.

    Answers `{command, event, forwarded}`: the recorded command, and whether a running executor
    took it. 409 `session_finished` on a finished session; 422 when the payload carries a
    credential; 502 `forward_failed` when the executor did not acknowledge (the command stays
    recorded).
    """
    return _steer(request, id, ControlCommand.MESSAGE)


# spec 003: GET /v1/agents/builds
@builds_router.get("", response=BuildsOut, summary="The public index of published builds")
def list_builds(request, limit: int | None = None):
    """Return every org's published builds, most recently updated first. No credential needed."""
    return {"builds": builds.builds_index(limit=limit)}


# spec 003: GET /v1/agents/builds/{org}/{project}
@builds_router.get("/{org}/{project}", response={200: BuildOut}, summary="One published build, turn by turn", exclude_none=True)
def get_build(request, org: str, project: str):
    """Return a published build with its turns, the commits they produced and the `git log`
    command that verifies them. No credential needed."""
    return builds.build_detail(org=org, project=project, origin=request.build_absolute_uri("/"))


# issue 30: every published build has its own address beside the project's latest
@builds_router.get("/{org}/{project}/{session_id}", response={200: BuildOut}, summary="One published build of a project, by its session", exclude_none=True)
def get_build_of_session(request, org: str, project: str, session_id: str):
    """Return published build `session_id` of `org`/`project` (same shape as the project's latest;
    404 when that session is not a published build of that project). No credential needed."""
    return builds.build_detail(org=org, project=project, session_id=session_id, origin=request.build_absolute_uri("/"))
