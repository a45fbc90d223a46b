"""Wire shapes of the agent, run and dashboard routes (spec 003 names on the wire).

Class docstrings and field descriptions are published in the OpenAPI document: write them for
the API's users.
"""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Schema
from pydantic import BeforeValidator, ConfigDict, Field, StrictBool, StrictFloat, StrictInt

from agents_site.schemas import BodySchema, choice, declare, id_field, minted_pattern, required_in_docs, text
from agents_site.vocabulary import ActivityKind, AgentHosting, AgentStatus, ApprovalOutcome, ApprovalState, ExecutionMode, FinishReason, LedgerKind, MetricsRange, RunKind, RunStatus

# The limits the services enforce (agents.services, agents.modes), declared for the docs.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
_NAME = "Unique in the org, matching `^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$` (surrounding blanks are trimmed); a word the API uses as a path (`runs`, `sessions`…) is refused."
_TOOLS = (
    "Tool names: a built-in (`current_time`, `calculator`, `http_get`), another agent of the org as "
    "`agent_<name>`, or `mcp__<server>__<tool>` of a registered MCP server. Trimmed, blanks dropped, "
    "duplicates merged; then at most 64 names of at most 128 characters each."
)


_MAX_TOKENS = (
    "The most tokens one reply may have (an integer from 1 to the deployment's cap, `AGENTS_MAX_OUTPUT_TOKENS`, "
    "4096 by default). Without it a reply may use the whole cap."
)
_TEMPERATURE = "Sampling temperature, a number from 0 to 2. Without it the gateway's default."
_TOP_P = "Nucleus sampling: a number above 0 and at most 1. Without it the gateway's default."


def _integral(value):
    # JSON Schema's integer includes 1.0: accept a whole float as that integer; a bool, a
    # string or 1.5 is still refused by the strict integer.
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: A JSON integer: 3 or 3.0; never `true`, `"3"` or 3.5.
JsonInt = Annotated[StrictInt, BeforeValidator(_integral)]


CONTEXT_WINDOW_MIN = 256
CONTEXT_WINDOW_MAX = 10_000_000
_CONTEXT_WINDOW = (
    f"The model's context window in tokens ({CONTEXT_WINDOW_MIN} to {CONTEXT_WINDOW_MAX}; the server's own, e.g. llama.cpp's `--ctx-size`). "
    "The prompt's oldest turns are dropped to fit it with `maxTokens` of room for the reply. Absent: the gateway's model "
    "metadata where it gives one, else the deployment's `AGENTS_CONTEXT_WINDOW_TOKENS`."
)


def _max_tokens_schema(schema: dict) -> None:
    # Read when the document is built (not at import): the cap is the deployment's setting.
    from django.conf import settings

    declare(on="integer", minimum=1, maximum=settings.AGENTS_MAX_OUTPUT_TOKENS)(schema)


_APPROVAL = (
    "Which tool calls wait for a person before they execute: `{\"tools\": [...]}`, each entry a tool "
    "name this agent has or a prefix ending in `*` matching one (`http_get`, `agent_*`, `mcp__github__*`). A model "
    "turn calling such a tool suspends the run (`waiting`) until `POST /v1/agents/sessions/{id}/approve` or `…/deny`. "
    "`{\"tools\": []}` removes the rules. At most 64 entries."
)


class ApprovalRules(BodySchema):
    """An agent's approval rules: the tools whose calls wait for a person."""

    tools: list[str] = Field(default_factory=list, max_length=64, description="Tool names or prefixes ending in `*`.",
                             json_schema_extra=declare(on="array", items={"type": "string", "minLength": 1, "maxLength": 200, "pattern": "\\S"}))


class ApprovalRulesOut(Schema):
    """An agent's approval rules."""

    tools: list[str]


class AgentIn(BodySchema):
    """Change an agent: every field is optional and an omitted (or null) field keeps its value.
    The name cannot change."""

    model_config = ConfigDict(populate_by_name=True)

    name: str | None = text(description="The agent's current name (a different name is refused: names are immutable).", pattern=NAME_PATTERN)
    model: str | None = text(description="Model id at the inference gateway (at most 200 characters; when the gateway lists models, one of them).", maxLength=200, pattern=r"\S")
    instructions: str | None = text(description="System prompt, at most 32 KiB of UTF-8.")
    description: str | None = None
    tools: list[str] | None = Field(None, description=_TOOLS, json_schema_extra=declare(on="array", items={"type": "string"}))
    executionMode: str | None = choice(ExecutionMode, description="`long-running` agents fire on their `schedule`; `one-shot` agents run when asked (and drop any schedule).")
    schedule: str | None = text(description="5-field cron (minute hour day-of-month month day-of-week, Sunday = 0) of at most 200 characters; required for `long-running`, ignored for `one-shot`.")
    timezone: str | None = text(description="IANA time zone of the schedule (default `UTC`).")
    computeRef: str | None = text(description="An opaque identifier of yours, at most 256 bytes.")
    serviceAccountId: str | None = text(description="An opaque identifier of yours, at most 256 bytes.")
    maxTokens: JsonInt | None = Field(None, description=_MAX_TOKENS, json_schema_extra=_max_tokens_schema)
    temperature: StrictFloat | None = Field(None, description=_TEMPERATURE, json_schema_extra=declare(on="number", minimum=0, maximum=2))
    topP: StrictFloat | None = Field(None, description=_TOP_P, json_schema_extra=declare(on="number", exclusiveMinimum=0, maximum=1))
    contextWindow: JsonInt | None = Field(None, description=_CONTEXT_WINDOW, json_schema_extra=declare(
        on="integer", minimum=CONTEXT_WINDOW_MIN, maximum=CONTEXT_WINDOW_MAX))
    approval: ApprovalRules | None = Field(None, description=_APPROVAL)


def _create_schema(schema: dict, model: type | None = None) -> None:
    required_in_docs("name")(schema, model)
    # A long-running agent needs its schedule (agents.modes.validate_lifecycle).
    schema["if"] = {"properties": {"executionMode": {"const": str(ExecutionMode.LONG_RUNNING)}}, "required": ["executionMode"]}
    schema["then"] = {"required": ["schedule"], "properties": {"schedule": {"type": "string", "pattern": r"\S", "maxLength": 200}}}


class AgentCreateIn(AgentIn):
    """Define an agent: only `name` is required."""

    model_config = ConfigDict(populate_by_name=True, json_schema_extra=_create_schema)

    name: str | None = text(description=_NAME, pattern=NAME_PATTERN)
    model: str | None = text(description="Model id at the inference gateway (at most 200 characters; when the gateway lists models, one of them). Default: the deployment's.", maxLength=200)


class ApprovalOut(Schema):
    """One tool call of a waiting run: asked for approval (`needsApproval`), or waiting with those that are."""

    toolCallId: str
    tool: str
    arguments: Any = Field(None, description="The call's arguments (credentials masked).")
    state: str = choice(ApprovalState, ...)
    outcome: str | None = choice(ApprovalOutcome, None, description="How the request ended as a person reads it (approved, edited, "
                                 "denied, timed out, stopped); absent while it is open and for a call that needed no approval.")
    needsApproval: bool
    runId: str
    sessionId: str
    round: int
    requestSeq: int | None = Field(None, description="The seq of the `approval` event that asked.")
    edited: bool
    answeredBy: str | None = None
    message: str | None = None
    startedBy: str | None = Field(None, description="Who started the run (the actor who may answer, besides the org's admins).")
    createdAt: str
    answeredAt: str | None = None


class RunOut(Schema):
    """A run as answered by the run and history routes. `kind` says what started it; a run no
    agent drives (a chat round of a preset) has no `agentId` and names the preset as `agent`."""

    id: str
    kind: str = choice(RunKind, ...)
    agent: str
    agentId: str | None = None
    status: str = choice(RunStatus, ...)
    model: str
    input: str
    output: str | None = None
    error: str | None = None
    code: str | None = Field(None, description="`context_length_exceeded` when the run failed because the prompt is over the model's "
                             "context window (answered 400, and in a stream's `run` frame); absent otherwise.")
    durationMs: int
    attempts: int | None = None
    promptTokens: int | None = None
    completionTokens: int | None = None
    toolCalls: int | None = None
    finishReason: str | None = choice(FinishReason, None, description="why the last model reply ended; null until the run finishes")
    actor: str | None = None
    traceId: str | None = None
    sessionId: str | None = None
    startedAt: str | None = None
    createdAt: str
    metadata: dict[str, str] | None = Field(None, description="The caller's labels sent with an OpenAI-compatible call "
                                            "(`metadata`: at most 16 string pairs); absent when none.")
    approvals: list[ApprovalOut] | None = Field(None, description="A `waiting` run's tool calls of its waiting turn: those asked for approval and "
                                                "those waiting with them; any other run's approval requests with how each was answered (absent when it asked none).")


class AgentOut(Schema):
    """An agent view: the definition plus its run count."""

    id: str
    name: str
    model: str
    description: str | None = None
    tools: list[str] = Field(default_factory=list)
    status: str = choice(AgentStatus, ...)
    executionMode: str = choice(ExecutionMode, ...)
    hosting: str = choice(AgentHosting, AgentHosting.PLATFORM)
    schedule: str | None = None
    timezone: str
    nextRunAt: str | None = None
    computeRef: str | None = None
    serviceAccountId: str | None = None
    maxTokens: int | None = Field(None, description="The most tokens one reply may have (absent: the deployment's cap).")
    temperature: float | None = Field(None, description="Sampling temperature (absent: the gateway's default).")
    topP: float | None = Field(None, description="Nucleus sampling (absent: the gateway's default).")
    contextWindow: int | None = Field(None, description="The model's context window in tokens (absent: the gateway's model metadata, else the deployment's default).")
    approval: ApprovalRulesOut | None = Field(None, description="The tools whose calls wait for a person (absent: none).")
    runs: int
    createdAt: str
    updatedAt: str


class AgentDetailOut(AgentOut):
    """One agent with its instructions and its 20 newest runs."""

    instructions: str
    recentRuns: list[RunOut]


class AgentListOut(Schema):
    agents: list[AgentOut]
    nextCursor: str | None = Field(None, description="Pass as `?cursor=` for the next page; absent on the last page.")


def _run_schema(schema: dict, model: type | None = None) -> None:
    # A streamed run executes in the request: never with `background: true` or a `targetId`.
    schema["not"] = {"anyOf": [
        {"required": ["stream", "background"], "properties": {"stream": {"const": True}, "background": {"const": True}}},
        {"required": ["stream", "targetId"], "properties": {"stream": {"const": True}, "targetId": {"type": "string"}}},
    ]}


class RunIn(BodySchema):
    """Run an agent on `input` (at most 128 KiB of UTF-8; may be empty).

    `background: true` (or the header `Prefer: respond-async`) queues the run for a worker
    and answers 202 `{runId, sessionId}` at once. `targetId` routes the run to that registered
    machine instead (202 with the run while it runs there). `stream: true` answers
    `text/event-stream` while the run executes.
    """

    model_config = ConfigDict(json_schema_extra=_run_schema)

    input: str = Field("", description="The user turn, at most 128 KiB of UTF-8.")
    background: StrictBool | None = Field(None, description="`true` queues the run and answers 202 at once (a JSON boolean).")
    stream: StrictBool | None = Field(None, description=(
        "`true` answers `text/event-stream` while the run executes: `delta` frames as the reply is written, `tool` frames, "
        "then one `run` frame with the recorded run (a JSON boolean; not with `background` or `targetId`)."))
    targetId: str | None = id_field(minted_pattern("tgt"), description="Id of an online machine of the org to run on (`tgt_` and 32 hex digits).")
    webhook: str | None = Field(None, description=(
        "A URL to POST this run's `run.finished` event to, signed like every webhook: it must fall under one of the "
        "org's webhook endpoints (same scheme, host and port; a path under the endpoint's), else 400."),
        json_schema_extra=declare(maxLength=2048, format="uri"))


class RunAcceptedOut(Schema):
    """The answer of a background run (202): the queued run's id and the id of its session."""

    runId: str
    sessionId: str | None = None


class RunListOut(Schema):
    runs: list[RunOut]
    nextCursor: str | None = Field(None, description="Pass as `?cursor=` for the next page; absent on the last page.")


class ActivityItemOut(Schema):
    """One row of the activity feed."""

    id: str
    kind: str = choice(ActivityKind, ...)
    agent: str
    message: str | None = None
    finishReason: str | None = choice(FinishReason, None, description="`stopped` on a `failed` row: a user stopped the run (not a "
                                      "failure of the agent). Absent otherwise.")
    at: str


class ActivityOut(Schema):
    activity: list[ActivityItemOut]


class MetricsPointOut(Schema):
    t: str
    v: int


class MetricsSeriesOut(Schema):
    key: str
    points: list[MetricsPointOut]


class MetricsResourceOut(Schema):
    """Resource usage: always null here (this store meters no CPU, memory, storage or cost)."""

    cpuVcpuHours: float | None = None
    memGbHours: float | None = None
    storageIoBytes: int | None = None
    costCents: int | None = None


class MetricsOut(Schema):
    """Run counts per agent over the window `range`, one point per bucket."""

    range: str = choice(MetricsRange, ...)
    series: list[MetricsSeriesOut]
    resource: MetricsResourceOut


class LedgerEntryOut(Schema):
    id: int
    kind: str = choice(LedgerKind, ...)
    amountCents: int
    runId: str | None = None
    model: str | None = None
    actor: str | None = None
    requestId: str | None = None
    note: str | None = None
    createdAt: str


class BillingOut(Schema):
    """The caller org's balance, the per-run fee and its newest ledger rows (cents)."""

    balanceCents: int
    feeCents: int
    ledger: list[LedgerEntryOut]
    nextCursor: str | None = Field(None, description="Pass as `?cursor=` for the next page; absent on the last page.")
