"""Wire shapes of the session and builds routes (spec 003 names on the wire)."""

from __future__ import annotations

from typing import Any

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool

from agents_site.schemas import BodySchema, ErrorOut, choice, id_field, minted_pattern, required_in_docs, text
from agents_site.vocabulary import ControlCommand, EventKind, FinishReason, SecretSeverity, SessionStatus
from sessions import fields

__all__ = ["ErrorOut"]  # re-exported: the session routes declare it


_PUBLISHED = "A JSON boolean. `true` lists the session on the public builds gallery; a published session needs a `project`."
_TERMINAL = "An `https://` URL of a live terminal on the session (at most 512 characters); \"\" withdraws it."
_TARGET = "Id of a registered machine of the org (`tgt_` and 32 hex digits); \"\" detaches."
_TERMINAL_OR_BLANK = "^$|" + fields.TERMINAL_PATTERN
_PROJECT_OR_BLANK = "^$|" + fields.PROJECT_PATTERN


def _limited(limit: int, what: str = "") -> object:
    return text(description=f"{what}At most {limit} characters.".strip(), maxLength=limit)


def _create_schema(schema: dict, model: type | None = None) -> None:
    required_in_docs("agent")(schema, model)
    # Publishing needs a project (sessions.fields.PUBLISH_MESSAGE).
    schema["if"] = {"properties": {"published": {"const": True}}, "required": ["published"]}
    schema["then"] = {"required": ["project"], "properties": {"project": {"type": "string", "pattern": fields.PROJECT_PATTERN}}}


class SessionIn(BodySchema):
    """Open a session. Only `agent` is required; text fields are trimmed."""

    model_config = ConfigDict(json_schema_extra=_create_schema)

    agent: str | None = text(description="Name of the agent (or surface) working in the session, at most 128 characters.", maxLength=fields.MAX_AGENT, pattern=r"\S")
    actor: str | None = _limited(fields.MAX_ACTOR, "Who acts (default: the caller). ")
    title: str | None = _limited(fields.MAX_TITLE)
    status: str | None = choice(SessionStatus, description="Default `running`; `done` or `error` records a finished session.")
    parentSessionId: str | None = id_field(minted_pattern("sess"), description="Id of a session of the org this one is a subagent of (`sess_` and 32 hex digits).")
    taskWorkflowId: str | None = _limited(fields.MAX_TASK_REF)
    taskRunId: str | None = _limited(fields.MAX_TASK_REF)
    host: str | None = _limited(fields.MAX_HOST)
    cwd: str | None = _limited(fields.MAX_CWD)
    repo: str | None = _limited(fields.MAX_REPO)
    target: str | None = id_field(minted_pattern("tgt"), description=_TARGET)
    terminal: str | None = text(description=_TERMINAL, maxLength=fields.MAX_TERMINAL, pattern=_TERMINAL_OR_BLANK)
    provider: str | None = _limited(fields.MAX_PROVIDER)
    account: str | None = _limited(fields.MAX_ACCOUNT)
    project: str | None = text(description="Project slug (a letter or digit, then letters, digits, `.`, `_`, `-`; at most 128); required to publish.",
                               maxLength=fields.MAX_PROJECT, pattern=_PROJECT_OR_BLANK)
    published: StrictBool | None = Field(None, description=_PUBLISHED)


class SessionPatchIn(BodySchema):
    """Change a session. An omitted (or null) field keeps its value; a finished session keeps its status."""

    status: str | None = choice(SessionStatus)
    title: str | None = _limited(fields.MAX_TITLE)
    target: str | None = id_field(minted_pattern("tgt"), description=_TARGET)
    terminal: str | None = text(description=_TERMINAL, maxLength=fields.MAX_TERMINAL, pattern=_TERMINAL_OR_BLANK)
    project: str | None = text(description="Project slug (as on create); \"\" drops it (not while published).",
                               maxLength=fields.MAX_PROJECT, pattern=_PROJECT_OR_BLANK)
    published: StrictBool | None = Field(None, description=_PUBLISHED)
    cwd: str | None = _limited(fields.MAX_CWD)


def _control_turn(schema: dict, model: type | None = None) -> None:
    # A `control` turn is a steering command (sessions.fields.check_control_payload).
    schema["if"] = {"properties": {"kind": {"const": str(EventKind.CONTROL)}}, "required": ["kind"]}
    schema["then"] = {
        "required": ["payload"],
        "properties": {
            "payload": {
                "type": "object",
                "required": ["command"],
                "properties": {"command": {"type": "string", "enum": [c for c in ControlCommand.values if c in ControlCommand.STEERING]},
                               "message": {"type": "string"}},
            }
        },
    }


class EventIn(BodySchema):
    """Append one turn. A payload carrying a credential is refused (422) and nothing is stored.
    A `control` turn's payload is a steering command: `{command, message?, payload?}`."""

    model_config = ConfigDict(json_schema_extra=_control_turn)

    kind: str = choice(EventKind.APPENDABLE, ..., description="The turn's kind (an `approval` is recorded only by the run that asks).")
    payload: Any = Field(None, description="Any JSON, at most 64 KiB once serialised.")
    actor: str | None = _limited(fields.MAX_ACTOR, "Who wrote the turn (default: the caller). ")


class ControlIn(BodySchema):
    """Optional body of a steering command: a note for the running agent and any JSON."""

    message: str | None = text(description="Text for the running agent, at most 16 KiB of UTF-8.")
    payload: Any = Field(None, description="Any JSON, at most 64 KiB once serialised.")


def _message_or_payload(schema: dict, model: type | None = None) -> None:
    schema["anyOf"] = [
        {"required": ["message"], "properties": {"message": {"type": "string", "minLength": 1}}},
        {"required": ["payload"], "properties": {"payload": {"not": {"type": "null"}}}},
    ]


class StopIn(ControlIn):
    """Optional body of a `stop`: a note, any JSON, and `push` (a coding run pushes the commits it made before the stop)."""

    push: bool | None = Field(None, description="A coding run only: push the commits made before the stop (default false: nothing is pushed).")


class ControlMessageIn(ControlIn):
    """Body of a `message` command: a non-empty `message`, a non-null `payload`, or both."""

    model_config = ConfigDict(json_schema_extra=_message_or_payload)


class LastEventOut(Schema):
    """The newest event of a session, previewed: first 240 bytes of its payload text."""

    seq: int
    kind: str = choice(EventKind, ...)
    actor: str | None = None
    preview: str
    at: str


class SessionOut(Schema):
    """A session view: its fields, event count and direct-child count."""

    id: str
    org: str
    agent: str
    actor: str | None = None
    status: str = choice(SessionStatus, ...)
    finishReason: str | None = choice(FinishReason, None, description="Why the run that ended this session ended: `stopped` is a "
                                      "user's stop (the session ends `error`, not a failure). Absent while it runs, or when no run said.")
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
    kind: str = choice(EventKind, ...)
    actor: str | None = None
    payload: Any = None
    createdAt: str


class EventBatchOut(Schema):
    """`{"events": [...]}`: the turns of a batch append as stored, in order (consecutive `seq`s)."""

    events: list[EventOut]


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
    pendingApprovals: list[dict[str, Any]] | None = Field(
        None, description="The tool calls the session's run waits on a person to approve (absent when none): "
                          "the items of `GET /v1/agents/approvals`; answer with `…/approve` or `…/deny`.")


class TreeNodeOut(Schema):
    """One node of a subagent flow; a leaf's `children` is null."""

    session: SessionOut
    children: list[TreeNodeOut] | None = None


class ControlOut(Schema):
    """The answer of a steering command: the recorded event and whether an executor took it."""

    command: str = choice(ControlCommand, ...)
    event: EventOut
    forwarded: bool


class ControlCommandOut(Schema):
    """One recorded steering command."""

    seq: int
    command: str = choice(ControlCommand, ...)
    message: str | None = None
    payload: Any = None
    push: bool | None = Field(None, description="A stop only: true when it asked a coding run to push the commits made before it.")


class ControlPollOut(Schema):
    """Commands newer than the cursor (≤200, oldest first) and the cursor to poll from next."""

    commands: list[ControlCommandOut]
    cursor: int


class FindingOut(Schema):
    """A credential found in a payload; the value itself is never returned."""

    rule: str
    severity: str = choice(SecretSeverity, ...)
    line: int
    preview: str
    fingerprint: str
    index: int | None = Field(None, description="In a batch append: the position (from 0) of the event carrying it.")
    field: str | None = Field(None, description="The body field that carried it (when a text field of a write was scanned).")


class SecretErrorOut(ErrorOut):
    """422 `secret_in_transcript`: a credential was found in what was sent; nothing was stored.
    The findings never carry the value itself."""

    findings: list[FindingOut]


class BuildEntryOut(Schema):
    """One published build in the public index."""

    org: str
    project: str
    session: str
    title: str
    agent: str
    status: str = choice(SessionStatus, ...)
    repo: str
    turns: int
    startedAt: str
    endedAt: str
    url: str


class BuildsOut(Schema):
    """`{"builds": [...]}`, most recently updated first."""

    builds: list[BuildEntryOut]


class BuildToolOut(Schema):
    """A tool call of a build's turn: its name, arguments (JSON text) and result, masked as stored and cut to 4000 characters."""

    name: str
    arguments: str
    result: str
    error: bool


class BuildTurnOut(Schema):
    """One turn of a build: its seq, text, the tool it called, and the commit it produced.

    A `commit` event carries the commit's `subject`, `diffstat`, `patch` (cut at 16 KiB) and
    `forTurn`, the seq of the turn that made it (the commit's `Agents-Turn` trailer)."""

    turn: int
    kind: str = choice(EventKind, ...)
    actor: str | None = None
    body: str
    tool: BuildToolOut | None = None
    commit: str | None = None
    subject: str | None = None
    diffstat: str | None = None
    patch: str | None = None
    forTurn: int | None = None
    at: str


class BuildSiblingOut(Schema):
    """Another published build of the same project, with its own page."""

    session: str
    title: str
    status: str = choice(SessionStatus, ...)
    startedAt: str
    endedAt: str
    url: str


class BuildOut(Schema):
    """A published build turn by turn, with the `git log` command that verifies its commits."""

    org: str
    project: str
    session: str
    title: str | None = None
    agent: str
    status: str = choice(SessionStatus, ...)
    repo: str | None = None
    model: str | None = None
    summary: str | None = None
    branch: str | None = None
    head: str | None = None
    diffstat: str | None = None
    changed: bool | None = None
    pushed: bool | None = None
    startedAt: str
    endedAt: str | None = None
    url: str
    turns: list[BuildTurnOut]
    builds: list[BuildSiblingOut]
    verify: str
