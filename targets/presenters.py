"""Turn targets and routed runs into their wire views (spec 003 JSON names)."""

from __future__ import annotations

from datetime import datetime

from agents_site.wire import compact, rfc3339
from targets.models import RoutedRun, Target
from targets.selectors import effective_status


def target_view(target: Target, *, load: tuple[int, int] = (0, 0), now: datetime | None = None) -> dict:
    """Return the wire view of `target` with its effective status and session load.

    `{id, label, kind, status, capacity?, host?, spec?, metrics? (with at), metricsAt?,
    sessions, running, createdAt, updatedAt}`; empty spec/metrics are omitted.
    """
    metrics = None
    if target.metrics and target.metrics_at is not None:
        metrics = {**target.metrics, "at": rfc3339(target.metrics_at)}
    return compact(
        {
            "id": target.id,
            "label": target.label,
            "kind": target.kind,
            "status": effective_status(target, now=now),
            "capacity": target.capacity,
            "host": target.host,
            "spec": target.spec or None,
            "metrics": metrics,
            "metricsAt": rfc3339(target.metrics_at) if target.metrics_at else None,
            "sessions": load[0],
            "running": load[1],
            "createdAt": rfc3339(target.created_at),
            "updatedAt": rfc3339(target.updated_at),
        },
        keep=("id", "label", "kind", "status", "sessions", "running", "createdAt", "updatedAt"),
    )


def routed_run_view(offer: RoutedRun) -> dict:
    """Return what a claim answers: `{runId, sessionId, **payload}` (never a credential), and
    `resume` for a run resumed after its approvals were answered (`targets.approvals.resume_claimed`)."""
    view = {**(offer.payload or {}), "runId": offer.run_id, "sessionId": offer.session_id}
    resume = getattr(offer, "resume", None)
    if resume is not None:
        view["resume"] = resume
    return view
