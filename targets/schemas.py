"""Wire shapes of the target routes (spec 003 names on the wire)."""

from __future__ import annotations

from typing import Any

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool

from agents_site.schemas import BodySchema, choice, declare, required_in_docs, text
from agents_site.vocabulary import MachineSandbox, TargetKind, TargetStatus
from targets.sanitize import MAX_GPUS
from targets.services import MAX_CAPACITY, MAX_HOST, MAX_LABEL


_SPEC = (
    "What the machine is: `{os, arch, cpus, memory (bytes), gpus: [{vendor, model, memory}]}`. "
    "Sanitized, never refused: strings trimmed and cut at 64 characters, numbers clamped, unknown "
    "keys dropped; only more than 32 GPUs is refused."
)
_METRICS = (
    "A heartbeat: `{load1, load5, load15, memUsed, memFree (bytes), gpuUtil (0..1)}`, sanitized like "
    "`spec`; the server stamps `metricsAt` with its own clock."
)


class TargetIn(BodySchema):
    """Change a machine: an omitted (or null) field keeps its value; a `metrics` change is a heartbeat."""

    label: str | None = text(description="At most 128 characters.", maxLength=MAX_LABEL, pattern=r"\S")
    kind: str | None = choice(TargetKind, description="Default `machine`.")
    status: str | None = choice(TargetStatus, description="The operator's intent (default `online`); a machine silent for 90 s reads `offline`.")
    capacity: str | None = text(description="At most 256 characters.", maxLength=MAX_CAPACITY)
    host: str | None = text(description="Host name, at most 256 characters; registering again from the same host re-links the caller's machine.", maxLength=MAX_HOST)
    spec: dict[str, Any] | None = Field(None, description=_SPEC, json_schema_extra=declare(on="object", properties={"gpus": {"anyOf": [{"type": "array", "maxItems": MAX_GPUS}, {"type": "null"}]}}))
    metrics: dict[str, Any] | None = Field(None, description=_METRICS)


class TargetCreateIn(TargetIn):
    """Register a machine (or re-link the caller's machine on the same `host`): only `label` is required."""

    model_config = ConfigDict(json_schema_extra=required_in_docs("label"))


class GpuOut(Schema):
    vendor: str | None = None
    model: str | None = None
    memory: int | None = None


class SpecOut(Schema):
    os: str | None = None
    arch: str | None = None
    cpus: int | None = None
    memory: int | None = None
    gpus: list[GpuOut] | None = None
    sandbox: str | None = choice(MachineSandbox, description="How the machine's runner confines coding commands: bubblewrap, none (the owner allowed unsandboxed commands) or unavailable (the run tool is refused there).")


class TargetMetricsOut(Schema):
    """A machine's last heartbeat; `at` is when the server received it."""

    load1: float | None = None
    load5: float | None = None
    load15: float | None = None
    memUsed: int | None = None
    memFree: int | None = None
    gpuUtil: float | None = None
    at: str


class TargetOut(Schema):
    """A registered machine with its effective status and live session load."""

    id: str
    label: str
    kind: str = choice(TargetKind, ...)
    status: str = choice(TargetStatus, ..., description="Effective status: `offline` after 90 s without a heartbeat, whatever was set.")
    capacity: str | None = None
    host: str | None = None
    spec: SpecOut | None = None
    metrics: TargetMetricsOut | None = None
    metricsAt: str | None = None
    sessions: int
    running: int
    createdAt: str
    updatedAt: str


class TargetListOut(Schema):
    targets: list[TargetOut]
    nextCursor: str | None = Field(None, description="Pass as `?cursor=` for the next page; absent on the last page.")


class TargetDeletedOut(Schema):
    deleted: bool
    id: str


class ClaimKeyOut(Schema):
    """The claim key, shown once."""

    targetId: str
    claimKey: str


class ReportIn(BodySchema):
    """A machine's report of a run it claimed; clamped to the limits, never refused (a `waiting`
    report with a malformed turn aside: 400). The run is `ok` when `status` is `ok` or, without a
    status, when `ok` is `true`; `status` `waiting` with `waiting` suspends it for approval."""

    scanned = False  # what a machine received from its model: masked where it is stored, never refused

    status: str | None = None
    ok: StrictBool | None = Field(None, description="A JSON boolean.")
    output: Any = None
    error: Any = None
    model: Any = None
    promptTokens: Any = None
    completionTokens: Any = None
    toolCalls: Any = None
    durationMs: Any = None
    changed: Any = None
    branch: Any = None
    commitSha: Any = None
    diffstat: Any = None
    pushed: Any = None
    commits: Any = Field(None, description="A coding run's commits: [{sha, subject, turn, diffstat}].")
    summary: Any = Field(None, description="A coding run's finish summary (the model's words).")
    finishReason: Any = Field(None, description="Why the run's last reply ended (`stopped` for a run its session's stop ended); another value is ignored.")
    stoppedCommand: Any = Field(None, description="A command the stop killed: {name, command, output so far}; recorded, masked, with the run's end.")
    waiting: Any = Field(None, description="With `status` `waiting`: the model's turn called a tool the agent's approval rules "
                                           "name. `{round, calls: [{toolCallId, name, arguments (JSON text)}]}`, every call of the turn, "
                                           "none executed. The run waits for a person and the machine holds no claim of it; once "
                                           "answered it is offered again and the claim carries `resume`.")


class ReportOut(Schema):
    delivered: bool


class RoutedRunOut(Schema):
    """What a claim answers: the run addressed to this machine (never a credential)."""

    model_config = {"extra": "allow"}

    runId: str
    sessionId: str = Field(default="")
