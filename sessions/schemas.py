"""Wire shapes of the session and builds routes (spec 003 names on the wire)."""

from __future__ import annotations

from typing import Any

from ninja import Schema
from pydantic import Field


class SessionIn(Schema):
    """Body of POST /v1/agents/sessions. Only `agent` is required."""

    agent: str | None = None
    actor: str | None = None
    title: str | None = None
    status: str | None = None
    parentSessionId: str | None = None
    taskWorkflowId: str | None = None
    taskRunId: str | None = None
    host: str | None = None
    cwd: str | None = None
    repo: str | None = None
    target: str | None = None
    terminal: str | None = None
    provider: str | None = None
    account: str | None = None
    project: str | None = None
    published: bool | None = None


class SessionPatchIn(Schema):
    """Body of PATCH /v1/agents/sessions/{id}. An omitted (or null) field keeps its value."""

    status: str | None = None
    title: str | None = None
    target: str | None = None
    terminal: str | None = None
    project: str | None = None
    published: bool | None = None
    cwd: str | None = None


class EventIn(Schema):
    """Body of POST …/{id}/events (documentation; the route reads the raw JSON itself)."""

    kind: str
    payload: Any = None
    actor: str | None = None


class ControlIn(Schema):
    """Optional body of POST …/{id}/{pause|resume|stop|message} (documentation)."""

    message: str | None = None
    payload: Any = None


class LastEventOut(Schema):
    """The newest event of a session, previewed: first 240 bytes of its payload text."""

    seq: int
    kind: str
    actor: str | None = None
    preview: str
    at: str


class SessionOut(Schema):
    """A session view: its fields, event count and direct-child count."""

    id: str
    org: str
    agent: str
    actor: str | None = None
    status: str
    parentSessionId: str | None = None
    rootSessionId: str
    title: str | None = None
    taskWorkflowId: str | None = None
    taskRunId: str | None = None
    host: str | None = None
    cwd: str | None = None
    repo: str | None = None
    terminal: str | None = None
    target: str | None = None
    provider: str | None = None
    account: str | None = None
    project: str | None = None
    published: bool | None = None
    events: int
    children: int
    startedAt: str
    endedAt: str | None = None
    createdAt: str
    updatedAt: str
    lastEvent: LastEventOut | None = None


class EventOut(Schema):
    """One stored turn; `payload` is the JSON the author sent, embedded as JSON."""

    id: str
    sessionId: str
    seq: int
    kind: str
    actor: str | None = None
    payload: Any = None
    createdAt: str


class EventListOut(Schema):
    """`{"events": [...], "nextCursor"?}`: one page of a session's log, oldest first."""

    events: list[EventOut]
    nextCursor: str | None = Field(None, description="Pass as `?cursor=` for the next page; absent on the last page.")


class SessionListOut(Schema):
    """`{"sessions": [...], "nextCursor"?}`."""

    sessions: list[SessionOut]
    nextCursor: str | None = Field(None, description="Pass as `?cursor=` for the next page; absent on the last page.")


class SessionDetailOut(SessionOut):
    """A session with its direct children and its 50 newest events (oldest first)."""

    childSessions: list[SessionOut] = Field(default_factory=list)
    recentEvents: list[EventOut] = Field(default_factory=list)


class TreeNodeOut(Schema):
    """One node of a subagent flow; a leaf's `children` is null."""

    session: SessionOut
    children: list[TreeNodeOut] | None = None


class ControlOut(Schema):
    """The answer of a steering command: the recorded event and whether an executor took it."""

    command: str
    event: EventOut
    forwarded: bool


class ControlCommandOut(Schema):
    """One recorded steering command."""

    seq: int
    command: str
    message: str | None = None
    payload: Any = None


class ControlPollOut(Schema):
    """Commands newer than the cursor (≤200, oldest first) and the cursor to poll from next."""

    commands: list[ControlCommandOut]
    cursor: int


class FindingOut(Schema):
    """A credential found in a payload; the value itself is never returned."""

    rule: str
    severity: str
    line: int
    preview: str
    fingerprint: str


class SecretErrorOut(Schema):
    """422 `secret_in_transcript`: the write was refused and nothing was stored."""

    status: int
    code: str
    error: str
    findings: list[FindingOut]


class ErrorOut(Schema):
    """The one error shape."""

    status: int
    code: str
    error: str


class BuildEntryOut(Schema):
    """One published build in the public index."""

    org: str
    project: str
    session: str
    title: str
    agent: str
    status: str
    repo: str
    turns: int
    startedAt: str
    endedAt: str


class BuildsOut(Schema):
    """`{"builds": [...]}`, most recently updated first."""

    builds: list[BuildEntryOut]


class BuildTurnOut(Schema):
    """One turn of a build: its seq, text, and the commit it produced."""

    turn: int
    kind: str
    actor: str | None = None
    body: str
    commit: str | None = None
    subject: str | None = None
    at: str


class BuildOut(Schema):
    """A published build turn by turn, with the `git log` command that verifies its commits."""

    org: str
    project: str
    session: str
    title: str | None = None
    agent: str
    status: str
    repo: str | None = None
    model: str | None = None
    startedAt: str
    endedAt: str | None = None
    turns: list[BuildTurnOut]
    verify: str
