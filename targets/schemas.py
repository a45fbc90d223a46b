"""Wire shapes of the target routes (spec 003 names on the wire)."""

from __future__ import annotations

from typing import Any

from ninja import Schema
from pydantic import Field


class TargetIn(Schema):
    """Body of POST/PATCH /v1/agents/targets. `spec`/`metrics` are sanitized, never refused
    (except more than 32 GPUs)."""

    label: str | None = None
    kind: str | None = None
    status: str | None = None
    capacity: str | None = None
    host: str | None = None
    spec: dict[str, Any] | None = None
    metrics: dict[str, Any] | None = None


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


class MetricsOut(Schema):
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
    kind: str
    status: str
    capacity: str | None = None
    host: str | None = None
    spec: SpecOut | None = None
    metrics: MetricsOut | None = None
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


class ReportIn(Schema):
    """A machine's report of a routed run; clamped, never refused."""

    status: str | None = None
    ok: bool | None = None
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


class ReportOut(Schema):
    delivered: bool


class RoutedRunOut(Schema):
    """What a claim answers: the run addressed to this machine (never a credential)."""

    model_config = {"extra": "allow"}

    runId: str
    sessionId: str = Field(default="")
