"""Wire shapes of /v1/agents/chat… (camelCase on the wire; reference §8.1).

Class docstrings and field descriptions are published in the OpenAPI document: write them for
the API's users. The services judge every rule (messages, roles, sizes, tools); these declare them.
"""

from __future__ import annotations

from typing import Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool

from agents_site.schemas import REF_PATTERN, BodySchema, ErrorOut, choice, declare, id_field, minted_pattern, required_in_docs, text
from agents.schemas import ApprovalOut, JsonInt, RunOut
from agents_site.vocabulary import ChatRole, FinishReason, MultitaskStrategy, RunStatus, ShareState, ShareSubject
from chat.presets import preset_ids
from chat.validation import MAX_CONTENT_BYTES, MAX_MESSAGES, MAX_TITLE, MAX_TOOLS, TOO_MANY_MESSAGES, TOO_MANY_TOOLS, TOOL_NAME_PATTERN

_CONTENT = f"The message's text, at most {MAX_CONTENT_BYTES // 1024} KiB of UTF-8. A credential in it refuses the request (422 `secret_in_transcript`)."


class MessageIn(BodySchema):
    """One message: `role` and `content` (OpenAI's shape)."""

    model_config = ConfigDict(json_schema_extra=required_in_docs("role", "content"))

    role: str | None = choice(ChatRole, description="`system`, `user`, `assistant` or `tool` (a tool's result the client sends back).")
    # 128 KiB is a byte limit, described in words: a declared maxLength would have generators
    # send bodies over the 1 MiB upload limit (413) to probe it.
    content: str | None = text(description=_CONTENT)


class ToolFunctionIn(BodySchema):
    """An OpenAI function: its name, what it does, and its parameters as a JSON Schema object."""

    name: str = Field(..., pattern=TOOL_NAME_PATTERN, description="1–64 letters, digits, `_` or `-`.")
    description: str | None = None
    parameters: dict[str, Any] | None = Field(None, description="A JSON Schema object (default: no parameters).")


class ToolIn(BodySchema):
    """An OpenAI tool definition: `{"type": "function", "function": {name, description?, parameters?}}`."""

    type: Literal["function"] = Field(..., description="Always `function`.")
    function: ToolFunctionIn


class ChatIn(BodySchema):
    """One tool-calling round: the caller's new messages, and what drives the round.

    `agent` (one of the org's agents, by name or id) or `preset` (default `assistant`) — not
    both. With `conversationId` the stored thread comes first (an unknown id starts a new
    conversation). `tools` are the caller's own functions: the model's calls of them come back
    as `ops` for the caller to execute.
    """

    model_config = ConfigDict(json_schema_extra=required_in_docs("messages"))
    max_items = {"messages": (MAX_MESSAGES, TOO_MANY_MESSAGES), "tools": (MAX_TOOLS, TOO_MANY_TOOLS)}

    messages: list[MessageIn] | None = Field(None, description=f"1 to {MAX_MESSAGES} messages (at most 512 KiB of content together); the last `user` one is stored with the reply.",
                                             json_schema_extra=declare(on="array", minItems=1, maxItems=MAX_MESSAGES))
    preset: str | None = choice(preset_ids(), description="A preset of GET /v1/agents/chat/presets (default `assistant`; not with `agent`).")
    agent: str | None = id_field(REF_PATTERN, description="Name or id of one of the org's agents: its model, instructions and tools drive the round (not with `preset`).")
    tools: list[ToolIn] | None = Field(None, description="The caller's own OpenAI function definitions; their calls come back as `ops`.",
                                       json_schema_extra=declare(on="array", maxItems=MAX_TOOLS))
    system: str | None = text(description="Added to the preset's system prompt (or the agent's instructions) after a blank line; at most 128 KiB of UTF-8.")
    conversationId: str | None = id_field(minted_pattern("conv"), description="Continue this conversation (`conv_` and 32 hex digits); an unknown id starts a new one.")
    stream: StrictBool | None = Field(None, description="`true` answers `text/event-stream`: `delta`, `tool` and `ops` frames, then one `chat` frame (or `error`).")
    multitaskStrategy: str | None = choice(MultitaskStrategy, description="While a round of the conversation is in flight: `reject` (409 `conversation_busy`, the default) or `enqueue` (wait for it, then run).")
    webhook: str | None = text(description=(
        "A URL to POST this round's `run.finished` event to: it must fall under one of the org's webhook endpoints, else 400."),
        maxLength=2048, format="uri")


class ActionOut(Schema):
    """A tool call executed during the round, with its result or its error."""

    name: str
    args: dict[str, Any]
    result: str | None = None
    error: str | None = None


class OpOut(Schema):
    """A call of a client-executed tool, for the caller to execute."""

    name: str
    args: dict[str, Any]


class ChatOut(Schema):
    """The answer of one round: the reply, what ran here (`actions`), what the caller must run (`ops`)."""

    reply: str
    actions: list[ActionOut]
    ops: list[OpOut]
    conversationId: str
    runId: str


class ChatWaitingOut(ChatOut):
    """A round whose agent asked a person to approve a tool call: no reply yet (`reply` is ""),
    the `waiting` run, and the `approvals` to answer on its session; the reply is added to the
    conversation when the resumed run finishes."""

    status: str = choice(RunStatus, ...)
    sessionId: str
    approvals: list[ApprovalOut]
    run: RunOut


class PresetOut(Schema):
    """A preset: what drives a round no agent drives."""

    id: str
    title: str
    systemPrompt: str
    serverExecuted: bool = Field(..., description="`true`: its tools run here (`actions`); `false`: the client runs them (`ops`).")
    tools: list[str] = Field(..., description="The names of the tools a round of it offers.")


class PresetListOut(Schema):
    presets: list[PresetOut]


class ConversationOut(Schema):
    """A conversation in the list."""

    id: str
    title: str
    createdAt: str
    updatedAt: str


class ConversationListOut(Schema):
    conversations: list[ConversationOut]
    nextCursor: str | None = Field(None, description="Pass as `?cursor=` for the next page; absent on the last page.")


class ToolCallsOut(Schema):
    """The tool calls of an assistant turn: executed here (`actions`) and handed to the client (`ops`)."""

    actions: list[ActionOut]
    ops: list[OpOut]


class MessageOut(Schema):
    """One stored turn."""

    id: str
    role: str = choice(ChatRole, ...)
    content: str
    toolCalls: ToolCallsOut | None = None
    runId: str | None = None
    finishReason: str | None = choice(FinishReason, None, description="`stopped`: the user stopped this reply; `content` is what "
                                      "was written before the stop. Absent for a whole turn.")
    createdAt: str


class ConversationDetailOut(Schema):
    """A conversation and its turns, oldest first."""

    conversationId: str
    title: str
    createdBy: str | None = Field(None, description="Who started it (the actor who may share it, besides the org's admins).")
    messages: list[MessageOut]


class ConversationIn(BodySchema):
    """Record turns without a completion: a new conversation with `messages` (none is fine)."""

    max_items = {"messages": (MAX_MESSAGES, TOO_MANY_MESSAGES)}

    title: str | None = text(description=f"At most {MAX_TITLE} characters (default: the first user message's start, or \"New conversation\").",
                             maxLength=MAX_TITLE)
    messages: list[MessageIn] | None = Field(None, description=f"Up to {MAX_MESSAGES} turns to record, in order (any role; at most 512 KiB of content together).",
                                             json_schema_extra=declare(on="array", maxItems=MAX_MESSAGES))


class RoundFailedOut(ErrorOut):
    """502 `run_failed`: the round's run failed (`error` says why); the caller's message stays stored."""

    runId: str
    conversationId: str


def _share_days_schema(schema: dict) -> None:
    # Read when the document is built (not at import): the longest life is the deployment's setting.
    from django.conf import settings

    declare(on="integer", minimum=1, maximum=settings.AGENTS_SHARE_MAX_DAYS)(schema)


class ShareIn(BodySchema):
    """How long the link lives: `expiresInDays` (default 30, at most 365)."""

    expiresInDays: JsonInt | None = Field(None, json_schema_extra=_share_days_schema,
                                          description="Days until the link stops working: a whole number from 1 to the deployment's "
                                          "most, `AGENTS_SHARE_MAX_DAYS` (365 by default); default 30.")


class ShareOut(Schema):
    """A share link, as its creator and the org's admins list it (never its token)."""

    id: str
    subject: str = choice(ShareSubject, ..., description="What it shows: a `conversation` or a `session`.")
    subjectId: str
    state: str = choice(ShareState, ..., description="`active`, `revoked` (readers get 404 at once) or `expired`.")
    createdBy: str
    createdAt: str
    expiresAt: str
    revokedAt: str | None = None


class ShareCreatedOut(ShareOut):
    """A new share link: `url` is what to hand out; `token` (in it) is shown this once and stored only as its hash."""

    token: str = Field(..., description="`shr_…`: a credential; whoever holds it reads the turns until it expires or is revoked.")
    url: str = Field(..., description="The public page: `/shared/<token>/` on this server.")


class ShareListOut(Schema):
    shares: list[ShareOut]


class SharedTurnOut(Schema):
    """One turn of a shared page: a conversation's (`role`) or a session's (`kind`), its words (credentials masked)."""

    turn: int
    role: str | None = choice(ChatRole, None, description="A conversation's turn: who wrote it.")
    kind: str | None = Field(None, description="A session's turn: its event kind (never `control` or `log`); a message also has its `role`.")
    text: str
    tool: dict[str, Any] | None = Field(None, description="A tool call: `{name, arguments, result, error}` (masked, cut at 4000 characters).")
    commit: str | None = None
    subject: str | None = Field(None, description="A commit's subject line.")
    finishReason: str | None = choice(FinishReason, None, description="`stopped`: a reply its user stopped.")
    at: str


class SharedOut(Schema):
    """What a share link shows anyone holding it: the turns, who shared them and when."""

    subject: str = choice(ShareSubject, ...)
    title: str
    sharedBy: str = Field(..., description="Who shared it (their user name).")
    sharedAt: str
    expiresAt: str
    turns: list[SharedTurnOut]
