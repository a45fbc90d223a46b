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
from ninja import Router, Status

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ControlCommand, SessionStatus
from sessions import builds, control, selectors, services
from sessions.presenters import control_command_view, event_view, session_view, tree_view
from sessions.schemas import (
    BuildOut,
    BuildsOut,
    ControlIn,
    ControlOut,
    ControlPollOut,
    ErrorOut,
    EventIn,
    EventOut,
    SecretErrorOut,
    SessionDetailOut,
    SessionIn,
    SessionListOut,
    SessionOut,
    SessionPatchIn,
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
    return body


def _openapi_body(schema) -> dict:
    return {"requestBody": {"content": {"application/json": {"schema": schema.model_json_schema()}}, "required": False}}


@sessions_router.get("/stream", summary="Live session and event updates (Server-Sent Events)", response={200: None, 403: ErrorOut, 404: ErrorOut})
async def stream_sessions(request, root: str | None = None, lastEventId: str | None = None):
    """Stream the org's session and event frames as SSE, resumable by Last-Event-ID (spec 003: GET …/sessions/stream)."""
    org = request.auth.org_slug
    last_event_id = parse_last_event_id(request.headers.get("Last-Event-ID"), lastEventId)
    root_id = await read_store(org, resolve_root, session_id=root) if root else None
    # Hand back the connections this request's thread took (the principal's lookup): a stream
    # lasts as long as its client, and a pooled connection kept that long starves every request.
    await sync_to_async(close_old_connections)()
    return stream_response(org=org, root=root_id, last_event_id=last_event_id)


@sessions_router.get("", response=SessionListOut, summary="List the org's sessions", exclude_none=True)
def list_sessions(request, root: str | None = None, parent: str | None = None, status: str | None = None, project: str | None = None, limit: int | None = None):
    """Return the org's sessions, newest first; roots only unless ?root= or ?parent= (spec 003: GET /v1/agents/sessions)."""
    org = request.auth.org_slug
    rows = selectors.session_list(root=root, parent=parent, status=status, project=project, limit=limit)
    return {"sessions": [session_view(r.session, org=org, children=r.children, last_event=r.last_event) for r in rows]}


@sessions_router.post("", response={201: SessionOut}, summary="Open a live session", exclude_none=True)
def create_session(request, payload: SessionIn):
    """Open a session (a subagent with parentSessionId) in the caller's org (spec 003: POST /v1/agents/sessions) → 201."""
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


@sessions_router.get("/{id}", response={200: SessionDetailOut, 404: ErrorOut}, summary="Read one session", exclude_none=True)
def get_session(request, id: str):
    """Return a session with its direct children and 50 newest events, oldest first (spec 003: GET …/sessions/{id})."""
    org = request.auth.org_slug
    detail = selectors.session_detail(session_id=id)
    view = session_view(detail.row.session, org=org, children=detail.row.children, last_event=detail.row.last_event)
    view["childSessions"] = [session_view(r.session, org=org, children=r.children, last_event=r.last_event) for r in detail.children]
    view["recentEvents"] = [event_view(e) for e in detail.recent_events]
    return view


@sessions_router.patch("/{id}", response={200: SessionOut, 400: ErrorOut, 404: ErrorOut, 409: ErrorOut}, summary="Update a session", exclude_none=True)
def patch_session(request, id: str, payload: SessionPatchIn):
    """Change status, title, target, terminal, project, published (spec 003: PATCH …/sessions/{id})."""
    changes = payload.model_dump(exclude_none=True)
    session = services.session_update(session_id=id, **changes)
    return session_view(session, org=request.auth.org_slug, children=selectors.child_count(session_id=session.id))


@sessions_router.get("/{id}/tree", response={200: TreeNodeOut, 404: ErrorOut}, summary="The subagent flow under a session")
def session_tree(request, id: str):
    """Return the flow rooted at this session from one indexed read; a leaf's children is null (spec 003: GET …/{id}/tree)."""
    session, by_parent = selectors.session_tree(session_id=id)
    return JsonResponse(tree_view(session, org=request.auth.org_slug, by_parent=by_parent))


@sessions_router.post(
    "/{id}/events",
    response={201: EventOut, 400: ErrorOut, 404: ErrorOut, 422: SecretErrorOut},
    summary="Append one turn to a session's log",
    exclude_none=True,
    openapi_extra=_openapi_body(EventIn),
)
def append_event(request, id: str):
    """Append a turn; 201 with the stored event and its seq; 422 with findings if it carries a credential (spec 003: POST …/{id}/events)."""
    body = _json_body(request, required=True)
    actor = body.get("actor")
    if actor is not None and not isinstance(actor, str):
        raise InvalidRequest("actor must be a string")
    kind = body.get("kind")
    event = services.session_append_event(
        session_id=id,
        kind=kind if isinstance(kind, str) else "",
        payload=body.get("payload"),
        actor=(actor or "").strip() or request.auth.actor,  # a blank actor names none: the caller
    )
    return Status(201, event_view(event))


@sessions_router.get("/{id}/control", response={200: ControlPollOut, 404: ErrorOut}, summary="Steering commands after a cursor", exclude_none=True)
def poll_control(request, id: str, after: int | None = None):
    """Return the control commands with seq > after, oldest first, at most 200, and the next cursor (spec 003: GET …/{id}/control)."""
    events, cursor = selectors.control_commands(session_id=id, after=after)
    return {"commands": [control_command_view(e) for e in events], "cursor": cursor}


def _steer(request, id: str, command: str):
    body = _json_body(request, required=False)
    event, forwarded = control.control_send(
        session_id=id, command=command, message=body.get("message"), payload=body.get("payload"), actor=request.auth.actor
    )
    return {"command": command, "event": event_view(event), "forwarded": forwarded}


_STEER_RESPONSES = {200: ControlOut, 400: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: SecretErrorOut, 502: ErrorOut}


@sessions_router.post("/{id}/pause", response=_STEER_RESPONSES, summary="Ask a running session to pause", exclude_none=True, openapi_extra=_openapi_body(ControlIn))
def pause_session(request, id: str):
    """Record `pause` as a durable control event; {command, event, forwarded} (spec 003: POST …/{id}/pause)."""
    return _steer(request, id, ControlCommand.PAUSE)


@sessions_router.post("/{id}/resume", response=_STEER_RESPONSES, summary="Ask a paused session to carry on", exclude_none=True, openapi_extra=_openapi_body(ControlIn))
def resume_session(request, id: str):
    """Record `resume` as a durable control event; {command, event, forwarded} (spec 003: POST …/{id}/resume)."""
    return _steer(request, id, ControlCommand.RESUME)


@sessions_router.post("/{id}/stop", response=_STEER_RESPONSES, summary="Ask a session to stop for good", exclude_none=True, openapi_extra=_openapi_body(ControlIn))
def stop_session(request, id: str):
    """Record `stop` as a durable control event; {command, event, forwarded} (spec 003: POST …/{id}/stop)."""
    return _steer(request, id, ControlCommand.STOP)


@sessions_router.post("/{id}/message", response=_STEER_RESPONSES, summary="Send text into a running session", exclude_none=True, openapi_extra=_openapi_body(ControlIn))
def message_session(request, id: str):
    """Record a `message` (≤16 KiB) or payload as a durable control event (spec 003: POST …/{id}/message)."""
    return _steer(request, id, ControlCommand.MESSAGE)


@builds_router.get("", response=BuildsOut, summary="The public index of published builds")
def list_builds(request, limit: int | None = None):
    """Return every org's published builds, most recently updated first; no login (spec 003: GET /v1/agents/builds)."""
    return {"builds": builds.builds_index(limit=limit)}


@builds_router.get("/{org}/{project}", response={200: BuildOut, 404: ErrorOut}, summary="One published build, turn by turn", exclude_none=True)
def get_build(request, org: str, project: str):
    """Return a published build with its turns, commits and the verifying git log; no login (spec 003: GET /v1/agents/builds/{org}/{project})."""
    return builds.build_detail(org=org, project=project)
