"""Reads of targets, claim keys and the routed-run mailbox. Org context required.

Spec 003: GET /v1/agents/targets, GET …/targets/{id}; reference §1.7 (effective status,
session load) and §2.4 (the dispatch gate).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from agents_site.pagination import Page, keyset_page, page_limit
from agents_site.vocabulary import RoutedRunState, SessionStatus, TargetStatus
from sessions.models import Session
from targets.errors import TargetNotFound, TargetUnavailable
from targets.models import ClaimKey, RoutedRun, Target

#: Seconds without a heartbeat after which an `online` target is answered as `offline`.
LIVE_WINDOW_SECONDS = 90
#: Seconds within which a target must have claimed (polled) to be dispatchable.
SERVING_TTL_SECONDS = 90
MAX_ID_LENGTH = 128


def effective_status(target: Target, *, now: datetime | None = None) -> str:
    """Return the status every view answers for `target`.

    The stored status is the operator's intent; an `online` target that has heartbeated but not
    within 90 s is `offline`. A target that never heartbeated keeps its stored status.
    """
    if target.status == TargetStatus.ONLINE and target.metrics_at is not None:
        now = now or timezone.now()
        if now - target.metrics_at > timedelta(seconds=LIVE_WINDOW_SECONDS):
            return TargetStatus.OFFLINE
    return target.status


def target_get(*, target_id: str) -> Target:
    """Return target `target_id` of the current org; raise `TargetNotFound` (404) otherwise."""
    if not target_id or len(target_id) > MAX_ID_LENGTH:
        raise TargetNotFound()
    target = Target.objects.filter(pk=target_id).first()
    if target is None:
        raise TargetNotFound()
    return target


def can_manage(target: Target, *, subject: str, is_org_admin: bool) -> bool:
    """Return True when `subject` owns `target` or is an org admin (reference §5 ownsTarget).

    An unowned target (`owner == ""`) is manageable by org admins only.
    """
    return bool(is_org_admin or (target.owner and target.owner == subject))


def target_get_managed(*, target_id: str, subject: str, is_org_admin: bool) -> Target:
    """Return target `target_id` if the caller may edit it; else the same 404 as an unknown id."""
    target = target_get(target_id=target_id)
    if not can_manage(target, subject=subject, is_org_admin=is_org_admin):
        raise TargetNotFound()
    return target


TARGETS_DEFAULT_LIMIT = 100
TARGETS_MAX_LIMIT = 500


def target_list(*, limit: int | None = None, cursor: str | None = None) -> Page[Target]:
    """Return one page of the current org's targets, newest first (`created_at` desc, id desc).

    `limit` default 100, clamped to 500; raises `InvalidRequest` (400) for a bad limit or cursor.
    """
    return keyset_page(
        Target.objects.all(),
        order=("-created_at", "-id"),
        limit=page_limit(limit, default=TARGETS_DEFAULT_LIMIT, maximum=TARGETS_MAX_LIMIT),
        cursor=cursor,
        tag="targets",
    )


def session_load(targets: list[Target]) -> dict[str, tuple[int, int]]:
    """Return `{target_id: (sessions, running)}` for `targets` in one query.

    A session counts for a target when it names the target, or when both carry the same
    non-empty host (reference §1.7); `running` counts those whose status is `running`.
    """
    counts = {t.id: [0, 0] for t in targets}
    if not targets:
        return {}
    by_host: dict[str, list[str]] = {}
    for t in targets:
        if t.host:
            by_host.setdefault(t.host, []).append(t.id)
    rows = Session.objects.filter(Q(target__in=list(counts)) | Q(host__in=list(by_host))).values_list("target", "host", "status")
    for target_ref, host, status in rows:
        matched = set(by_host.get(host, [])) if host else set()
        if target_ref in counts:
            matched.add(target_ref)
        for target_id in matched:
            counts[target_id][0] += 1
            counts[target_id][1] += status == SessionStatus.RUNNING
    return {target_id: (c[0], c[1]) for target_id, c in counts.items()}


def target_dispatchable(*, target_id: str) -> Target:
    """Return target `target_id` if a run may be routed to it now; raise otherwise.

    The gate (reference §2.4 TargetDispatchable): the target exists in the current org
    (`TargetNotFound`, 404), its effective status is `online` (else 409 `target_unavailable`
    "target is offline" / "target is draining"), it has a claim key ("target has no claim
    key"), and its daemon claimed within 90 s ("target has not claimed work within 90 s").
    Never falls back to another target.
    """
    target = target_get(target_id=target_id)
    now = timezone.now()
    status = effective_status(target, now=now)
    if status == TargetStatus.DRAINING:
        raise TargetUnavailable("target is draining")
    if status != TargetStatus.ONLINE:
        if target.status == TargetStatus.ONLINE:
            raise TargetUnavailable(f"target is offline: no heartbeat for {LIVE_WINDOW_SECONDS} s")
        raise TargetUnavailable("target is offline")
    key = ClaimKey.objects.filter(target_id=target.id).first()
    if key is None:
        raise TargetUnavailable("target has no claim key")
    if key.serving_at is None or now - key.serving_at > timedelta(seconds=SERVING_TTL_SECONDS):
        raise TargetUnavailable(f"target has not claimed work within {SERVING_TTL_SECONDS} s; is its runner running?")
    return target


def routed_run_get(*, run_id: str) -> RoutedRun | None:
    """Return the mailbox row of run `run_id` in the current org, or None."""
    return RoutedRun.objects.filter(pk=run_id).first()


def routed_pending(*, target_id: str) -> list[RoutedRun]:
    """Return the offers waiting for target `target_id`, oldest first (FIFO)."""
    return list(RoutedRun.objects.filter(target_id=target_id, state=RoutedRunState.OFFERED).order_by("offered_at", "run_id"))


def target_labels(*, target_ids: set[str]) -> dict[str, str]:
    """Return `{target id: label}` for those of `target_ids` the org has (one query; none for an empty set)."""
    if not target_ids:
        return {}
    return dict(Target.objects.filter(pk__in=target_ids).values_list("id", "label"))
