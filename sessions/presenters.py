"""Turn session and event rows into their wire views (spec 003 JSON names; reference §2.3)."""

from __future__ import annotations

import json

from agents_site.wire import compact, rfc3339
from sessions.models import Event, Session

PREVIEW_BYTES = 240


def payload_value(text: str):
    """Return the JSON value of stored payload text, None for "" (no payload)."""
    return json.loads(text) if text else None


def event_view(event: Event, *, payload=None, payload_given: bool = False) -> dict:
    """Return `{id, sessionId, seq, kind, actor?, payload?, createdAt}`; payload embedded as JSON.

    Pass `payload`/`payload_given` to reuse an already-decoded payload. An event just appended
    carries the view its bus frame was built from (`_wire_view`, set by the append): events
    never change once stored, so that view is returned instead of decoding the payload again.
    """
    if not payload_given and (cached := event.__dict__.get("_wire_view")) is not None:
        return cached
    value = payload if payload_given else payload_value(event.payload)
    return compact(
        {
            "id": event.id,
            "sessionId": event.session_id,
            "seq": event.seq,
            "kind": event.kind,
            "actor": event.actor,
            "payload": value,
            "createdAt": rfc3339(event.created_at),
        },
        keep=("id", "sessionId", "seq", "kind", "createdAt"),
    )


def last_event_view(event: Event) -> dict:
    """Return `{seq, kind, actor?, preview, at}`; preview = first 240 BYTES of the payload text."""
    preview = event.payload.encode()[:PREVIEW_BYTES].decode(errors="ignore")
    return compact(
        {"seq": event.seq, "kind": event.kind, "actor": event.actor, "preview": preview, "at": rfc3339(event.created_at)},
        keep=("seq", "kind", "preview", "at"),
    )


def session_view(session: Session, *, org: str, children: int = 0, last_event: Event | None = None) -> dict:
    """Return the sessionView of reference §2.3 (`events` = event count = `last_seq`).

    `children` is the direct fan-out; `lastEvent` appears only when `last_event` is given.
    """
    view = compact(
        {
            "id": session.id,
            "org": org,
            "agent": session.agent,
            "actor": session.actor,
            "status": session.status,
            "finishReason": session.finish_reason,
            "parentSessionId": session.parent_id,
            "rootSessionId": session.root_id,
            "title": session.title,
            "taskWorkflowId": session.task_workflow_id,
            "taskRunId": session.task_run_id,
            "host": session.host,
            "cwd": session.cwd,
            "repo": session.repo,
            "terminal": session.terminal,
            "target": session.target,
            "provider": session.provider,
            "account": session.account,
            "project": session.project,
            "published": True if session.published else None,
            "events": session.last_seq,
            "children": children,
            "startedAt": rfc3339(session.started_at),
            "endedAt": rfc3339(session.ended_at),
            "createdAt": rfc3339(session.created_at),
            "updatedAt": rfc3339(session.updated_at),
        },
        keep=("id", "org", "agent", "status", "rootSessionId", "events", "children", "startedAt", "createdAt", "updatedAt"),
    )
    if last_event is not None:
        view["lastEvent"] = last_event_view(last_event)
    return view


def tree_view(root: Session, *, org: str, by_parent: dict[str, list[Session]]) -> dict:
    """Return `{session, children: [node] | null}` rooted at `root`, from an in-memory index.

    `by_parent` maps a session id to its direct children, oldest first. Built without
    recursion, so a deep chain of subagents cannot exhaust the stack.
    """
    order: list[Session] = []
    stack = [root]
    while stack:
        session = stack.pop()
        order.append(session)
        stack.extend(by_parent.get(session.id, ()))
    nodes = {s.id: {"session": session_view(s, org=org, children=len(by_parent.get(s.id, ()))), "children": None} for s in order}
    for session in order:
        kids = by_parent.get(session.id)
        if kids:
            nodes[session.id]["children"] = [nodes[kid.id] for kid in kids]
    return nodes[root.id]


def control_command_view(event: Event) -> dict:
    """Return `{seq, command, message?, payload?, push?}` of a `control` event (`push: true` only on a stop that said so)."""
    body = payload_value(event.payload) or {}
    view = {"seq": event.seq, "command": body.get("command", "")}
    if "message" in body:
        view["message"] = body["message"]
    if "payload" in body:
        view["payload"] = body["payload"]
    if body.get("push") is True:
        view["push"] = True
    return view
