"""Reads behind the dashboards: the activity feed and the invocations histogram (reference §7).

Every figure is a count of recorded runs or an agent's own timestamps; nothing is invented.
Org context required.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone

from agents.models import Agent
from runs.models import Run
from runs.selectors import runs_finished
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ActivityKind, FinishReason, MetricsRange, RunStatus
from agents_site.wire import rfc3339

ACTIVITY_RUNS = 200
ACTIVITY_LIMIT = 50
FAILED_MESSAGE_BYTES = 200
METRICS_MAX_RUNS = 10_000

_RANGES = {
    MetricsRange.DAY: (24, timedelta(hours=1)),
    MetricsRange.WEEK: (7, timedelta(days=1)),
    MetricsRange.MONTH: (30, timedelta(days=1)),
}


def activity_feed(*, actor: str | None = None) -> list[dict]:
    """Return the org's recent activity, newest first, at most 50 rows (`actor`: only the runs that
    actor started — a member's own, `agents_site.permissions.own_actor`; agents' rows stay).

    Rows: each of the newest 200 finished runs as `invoked` ("Invoked <model>") or `failed`
    (its error, trimmed, cut to 200 bytes, or "Run failed"; a run a user stopped is still
    `failed`, as spec 003 counts it, with `finishReason: stopped` so a reader tells it from a
    failure); each agent as `created` and, when it changed since, `updated`. Shape: `{id, kind,
    agent, message, finishReason?, at}` (`at` RFC 3339). Two queries.
    """
    rows: list[dict] = []
    for run in runs_finished(limit=ACTIVITY_RUNS, actor=actor).items:
        if run.status == RunStatus.OK:
            kind, message = ActivityKind.INVOKED, f"Invoked {run.model}"
        else:
            error = (run.error or "").strip().encode()[:FAILED_MESSAGE_BYTES].decode(errors="ignore")
            kind, message = ActivityKind.FAILED, error or "Run failed"
        row = {"id": run.id, "kind": str(kind), "agent": run.agent_name, "message": message, "at": rfc3339(run.finished_at)}
        if run.status != RunStatus.OK and run.finish_reason == FinishReason.STOPPED:
            row["finishReason"] = str(FinishReason.STOPPED)
        rows.append(row)
    for agent in Agent.objects.only("id", "name", "created_at", "updated_at"):
        rows.append({"id": f"{agent.id}:created", "kind": str(ActivityKind.CREATED), "agent": agent.name,
                     "message": "Agent created", "at": rfc3339(agent.created_at)})
        if rfc3339(agent.updated_at) > rfc3339(agent.created_at):
            rows.append({"id": f"{agent.id}:updated", "kind": str(ActivityKind.UPDATED), "agent": agent.name,
                         "message": "Configuration updated", "at": rfc3339(agent.updated_at)})
    rows.sort(key=lambda row: row["at"], reverse=True)
    return rows[:ACTIVITY_LIMIT]


RANGE_MESSAGE = "range must be " + "|".join(MetricsRange.values)


def metrics_range(value: str | None) -> MetricsRange:
    """Return the range named `value` exactly (`24h`, `7d`, `30d`); None is `30d`.

    Raises `InvalidRequest` (400) for any other word: the reference falls back to 30 days
    silently, which hides a typo (`7D`, `week`) behind a plausible answer.
    """
    if value is None:
        return MetricsRange.MONTH
    if value not in MetricsRange.values:
        raise InvalidRequest(RANGE_MESSAGE)
    return MetricsRange(value)


def invocation_metrics(*, window: str | None = None, now: datetime | None = None, actor: str | None = None) -> dict:
    """Return the invocations histogram of `window` (`24h`, `7d`, `30d`): `{range, series: [{key,
    points: [{t, v}]}], resource}`; `actor` counts only the runs that actor started (a member's own).

    The window is `buckets × step` back from now (24 × 1 h, 7 × 1 d or 30 × 1 d), not aligned to
    the clock. One series per agent name that finished a run in the window, sorted by name,
    every bucket present (zeros included); `v` counts runs by `finished_at`. No runs → `series: []`.
    `resource` carries `cpuVcpuHours`, `memGbHours`, `storageIoBytes`, `costCents`, all None:
    this store meters none of them. One query (at most 10 000 runs read).
    """
    canonical = metrics_range(window)
    buckets, step = _RANGES[canonical]
    now = now or timezone.now()
    start = now - buckets * step
    counts: dict[str, list[int]] = {}
    finished = Run.objects.filter(status__in=RunStatus.FINISHED, finished_at__gte=start).order_by("-finished_at")
    if actor is not None:
        finished = finished.filter(actor=actor)
    for name, finished_at in finished.values_list("agent_name", "finished_at")[:METRICS_MAX_RUNS]:
        index = min(max(int((finished_at - start) / step), 0), buckets - 1)
        counts.setdefault(name, [0] * buckets)[index] += 1
    times = [rfc3339(start + i * step) for i in range(buckets)]
    series = [{"key": name, "points": [{"t": t, "v": v} for t, v in zip(times, counts[name], strict=True)]} for name in sorted(counts)]
    return {
        "range": str(canonical),
        "series": series,
        "resource": {"cpuVcpuHours": None, "memGbHours": None, "storageIoBytes": None, "costCents": None},
    }
