"""Writes of registered machines (spec 003: POST/PATCH/DELETE /v1/agents/targets…). Org context required.

Claim keys and the claim proofs live in `targets.keys`; the routed-run mailbox (offer, claim,
report, withdraw) in `targets.mailbox`; `routed_offer` and `routed_withdraw` are re-exported
here as the run path's entry points. Reference §1.7, §2.4.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import IntegrityError
from django.db.models import Q
from django.utils import timezone

from agents_site.ids import mint_id
from agents_site.errors import Conflict, InvalidRequest
from agents_site.vocabulary import RoutedRunState, TargetKind, TargetStatus
from targets import wake
from targets.mailbox import routed_offer, routed_withdraw  # noqa: F401  (the run path's entry points)
from targets.models import RoutedRun, Target
from targets.sanitize import clean_metrics, clean_spec
from targets.selectors import target_get_managed
from tenancy import stores

MAX_LABEL = 128
MAX_CAPACITY = 256
MAX_HOST = 256

UNSET = object()


@dataclass
class TargetInput:
    """The fields of a target register/patch; `UNSET` marks a field the request omitted."""

    label: object = UNSET
    kind: object = UNSET
    status: object = UNSET
    capacity: object = UNSET
    host: object = UNSET
    spec: object = UNSET
    metrics: object = UNSET


def _given(value: object) -> bool:
    return value is not UNSET and value is not None


def _clean_kind(kind: object) -> str:
    kind = (kind or "").strip() if isinstance(kind, str) else kind
    if kind not in TargetKind.values:
        raise InvalidRequest("kind must be " + "|".join(TargetKind.values))
    return kind


def _clean_status(status: object) -> str:
    status = (status or "").strip() if isinstance(status, str) else status
    if status not in TargetStatus.values:
        raise InvalidRequest("status must be " + "|".join(TargetStatus.values))
    return status


def _clean_text(value: object, *, limit: int, name: str) -> str:
    value = value.strip() if isinstance(value, str) else ""
    if len(value) > limit:
        raise InvalidRequest(f"{name} too long")
    return value


def _clean_label(label: object, *, patch: bool) -> str:
    label = label.strip() if isinstance(label, str) else ""
    if not label:
        raise InvalidRequest("label cannot be empty" if patch else "label is required")
    if len(label) > MAX_LABEL:
        raise InvalidRequest("label too long")
    return label


def target_register(*, owner: str, data: TargetInput) -> tuple[Target, bool]:
    """Register a machine for `owner`, or re-link the one it already registered.

    Returns `(target, created)`: created → 201, re-link → 200 (spec 003: POST
    /v1/agents/targets). Re-linking is keyed on (org, host, owner): a row with the same
    non-empty host owned by `owner` (or unowned: it is adopted and bound) is updated in place,
    keeping its id and `createdAt`; a row owned by another member is never adopted. Non-empty
    metrics stamp `metricsAt` with the server clock. Raises `InvalidRequest` (400) — "label is
    required", "label too long", "kind must be …", "status must be …", "capacity too long",
    "host too long", "too many gpus" — before anything is written.
    """
    label = _clean_label(data.label if _given(data.label) else "", patch=False)
    kind = _clean_kind(data.kind) if _given(data.kind) else TargetKind.MACHINE
    status = _clean_status(data.status) if _given(data.status) else TargetStatus.ONLINE
    capacity = _clean_text(data.capacity if _given(data.capacity) else "", limit=MAX_CAPACITY, name="capacity")
    host = _clean_text(data.host if _given(data.host) else "", limit=MAX_HOST, name="host")
    spec = clean_spec(data.spec if _given(data.spec) else None)
    metrics = clean_metrics(data.metrics if _given(data.metrics) else None)
    now = timezone.now()
    fields = {
        "owner": owner,
        "label": label,
        "kind": kind,
        "status": status,
        "capacity": capacity,
        "spec": spec,
        "metrics": metrics,
        "metrics_at": now if metrics else None,
        "updated_at": now,
    }
    for _ in range(2):  # a concurrent first registration of the same host wins; re-link to it
        try:
            with stores.org_atomic():
                existing = None
                if host:
                    candidates = Target.objects.filter(host=host).filter(Q(owner=owner) | Q(owner=""))
                    existing = sorted(candidates, key=lambda t: (t.owner != owner, -t.created_at.timestamp()))[:1]
                    existing = existing[0] if existing else None
                if existing is not None:
                    for name, value in fields.items():
                        setattr(existing, name, value)
                    existing.save()
                    return existing, False
                target = Target.objects.create(id=mint_id("tgt"), host=host, created_at=now, **fields)
                return target, True
        except IntegrityError:
            continue
    raise Conflict("the target was registered concurrently; retry")


def target_update(*, target_id: str, subject: str, is_org_admin: bool, data: TargetInput) -> Target:
    """Change target `target_id` in place; omitted fields keep their value (spec 003: PATCH).

    Only its owner or an org admin may; everyone else gets `TargetNotFound` (404), like an
    unknown id. `capacity: ""` clears it; `spec` and `metrics` replace. A metrics patch is a
    heartbeat stamped by the server clock; all-zero metrics clear it (`metricsAt` absent).
    Raises `InvalidRequest` (400, nothing written) or `Conflict` (409: another of the owner's
    targets already has that host).
    """
    target = target_get_managed(target_id=target_id, subject=subject, is_org_admin=is_org_admin)
    now = timezone.now()
    if _given(data.label):
        target.label = _clean_label(data.label, patch=True)
    if _given(data.kind):
        target.kind = _clean_kind(data.kind)
    if _given(data.status):
        target.status = _clean_status(data.status)
    if _given(data.capacity):
        target.capacity = _clean_text(data.capacity, limit=MAX_CAPACITY, name="capacity")
    if _given(data.host):
        target.host = _clean_text(data.host, limit=MAX_HOST, name="host")
    if _given(data.spec):
        target.spec = clean_spec(data.spec)
    if _given(data.metrics):
        target.metrics = clean_metrics(data.metrics)
        target.metrics_at = now if target.metrics else None
    target.updated_at = now
    try:
        with stores.org_atomic():
            target.save()
    except IntegrityError as exc:
        raise Conflict("another of the owner's targets already has this host") from exc
    return target


def target_delete(*, target_id: str, subject: str, is_org_admin: bool) -> str:
    """Deregister target `target_id`; return its id (spec 003: DELETE → 200).

    Owner or org admin only (else `TargetNotFound`, 404). Its claim key goes with it, its open
    offers are withdrawn, and its waiting claims are woken (they then answer 403). Sessions
    keep the target id they recorded.
    """
    with stores.org_atomic():
        target = target_get_managed(target_id=target_id, subject=subject, is_org_admin=is_org_admin)
        open_runs = list(RoutedRun.objects.filter(target_id=target.id, state__in=RoutedRunState.OPEN).values_list("run_id", flat=True))
        for run_id in open_runs:
            routed_withdraw(run_id=run_id, reason="the target was deleted")
        target.delete()
        wake.notify_on_commit(target_id=target_id)
    return target_id


