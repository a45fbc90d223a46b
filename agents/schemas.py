"""Wire shapes of the agent definition routes (spec 003 names on the wire)."""

from __future__ import annotations

from ninja import Schema
from pydantic import ConfigDict, Field


class AgentIn(Schema):
    """Body of POST/PATCH /v1/agents. Every field optional on PATCH; `name` immutable there."""

    model_config = ConfigDict(populate_by_name=True)

    name: str | None = None
    model: str | None = None
    instructions: str | None = None
    description: str | None = None
    tools: list[str] | None = None
    executionMode: str | None = None
    schedule: str | None = None
    timezone: str | None = None
    computeRef: str | None = None
    serviceAccountId: str | None = None


class RunOut(Schema):
    """A run as answered by the run and history routes."""

    id: str
    agent: str
    status: str
    model: str
    input: str
    output: str | None = None
    error: str | None = None
    durationMs: int
    attempts: int | None = None
    promptTokens: int | None = None
    completionTokens: int | None = None
    toolCalls: int | None = None
    actor: str | None = None
    traceId: str | None = None
    sessionId: str | None = None
    startedAt: str | None = None
    createdAt: str


class AgentOut(Schema):
    """An agent view: the definition plus its run count."""

    id: str
    name: str
    model: str
    description: str | None = None
    tools: list[str] = Field(default_factory=list)
    status: str
    executionMode: str
    schedule: str | None = None
    timezone: str
    nextRunAt: str | None = None
    computeRef: str | None = None
    serviceAccountId: str | None = None
    runs: int
    createdAt: str
    updatedAt: str


class AgentDetailOut(AgentOut):
    """One agent with its instructions and its 20 newest runs."""

    instructions: str
    recentRuns: list[RunOut]


class AgentListOut(Schema):
    agents: list[AgentOut]


class RunIn(Schema):
    """Body of POST /v1/agents/{ref}/run: the caller's input (≤ 128 KiB; may be empty).

    `background: true` (or the header `Prefer: respond-async`) queues the run for a worker
    and answers 202 `{runId, sessionId}` at once. `targetId` routes the run to that registered
    machine instead (→ 202 with the run while it runs there, see targets.routing).
    """

    input: str = ""
    background: bool | None = None
    targetId: str | None = None


class RunAcceptedOut(Schema):
    """202 of a background run: the queued run's id and its (task-backed) session's id."""

    runId: str
    sessionId: str | None = None


class ErrorOut(Schema):
    """The one error shape: `{"status", "code", "error"}` plus named extras."""

    status: int
    code: str
    error: str


class RunListOut(Schema):
    runs: list[RunOut]


class ActivityItemOut(Schema):
    """One row of the activity feed."""

    id: str
    kind: str
    agent: str
    message: str | None = None
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
    range: str
    series: list[MetricsSeriesOut]
    resource: MetricsResourceOut


class LedgerEntryOut(Schema):
    id: int
    kind: str
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
