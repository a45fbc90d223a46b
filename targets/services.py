"""Writes of targets, claim keys and the routed-run mailbox. Org context required.

Spec 003: POST/PATCH/DELETE /v1/agents/targets…, POST …/{id}/key, …/{id}/claim,
…/{id}/runs/{runId}/report; reference §1.7–1.9, §2.4. Every change that a waiting claim must
see (an offer, a key rotation, a delete) wakes the target's claims after it commits.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, router, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from agents.ids import mint_id
from agents_site.errors import Conflict, InvalidRequest
from agents_site.vocabulary import ControlCommand, RoutedRunState, RunStatus, TargetKind, TargetStatus
from targets import wake
from targets.errors import ClaimRejected, TargetNotFound
from targets.models import ClaimKey, RoutedRun, Target
from targets.sanitize import clean_metrics, clean_report, clean_spec
from targets.selectors import can_manage, target_get, target_get_managed
from targets.settle import routed_run_settle
from tenancy import stores

#: Seconds past a routed run's own time limit after which an unreported claim is given up.
REPORT_GRACE_SECONDS = 60

MAX_LABEL = 128
MAX_CAPACITY = 256
MAX_HOST = 256
MAX_KEY_LENGTH = 128
CLAIM_KEY_PREFIX = "tgtk_"
#: Keys a routed run's payload may never carry: the machine uses its own credentials.
CREDENTIAL_KEYS = frozenset({"apikey", "api_key", "authorization", "token", "secret", "password", "credential", "claimkey"})

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


def _on_commit_wake(target_id: str) -> None:
    org = stores.current_org()
    transaction.on_commit(lambda: wake.notify(org=org, target_id=target_id), using=router.db_for_write(RoutedRun))


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
            with transaction.atomic(using=router.db_for_write(Target)):
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
        with transaction.atomic(using=router.db_for_write(Target)):
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
    with transaction.atomic(using=router.db_for_write(Target)):
        target = target_get_managed(target_id=target_id, subject=subject, is_org_admin=is_org_admin)
        open_runs = list(RoutedRun.objects.filter(target_id=target.id, state__in=RoutedRunState.OPEN).values_list("run_id", flat=True))
        for run_id in open_runs:
            routed_withdraw(run_id=run_id, reason="the target was deleted")
        target.delete()
        _on_commit_wake(target_id)
    return target_id


def hash_claim_key(key: str) -> str:
    """Return the SHA-256 hex of a claim key, as stored."""
    return hashlib.sha256(key.encode()).hexdigest()


def claim_key_mint(*, target_id: str, subject: str, is_org_admin: bool) -> str:
    """Mint or rotate the claim key of target `target_id`; return the key (shown once).

    Key: `tgtk_` + 64 hex (32 random bytes); only its SHA-256 is stored. Rotation supersedes
    the old daemon at once: its next claim or report is refused and its waiting claim is woken
    to be refused. Owner or org admin only, else `TargetNotFound` (404). Spec 003: POST
    …/targets/{id}/key.
    """
    key = CLAIM_KEY_PREFIX + secrets.token_hex(32)
    with transaction.atomic(using=router.db_for_write(ClaimKey)):
        target = target_get_managed(target_id=target_id, subject=subject, is_org_admin=is_org_admin)
        ClaimKey.objects.update_or_create(
            target=target, defaults={"key_hash": hash_claim_key(key), "serving_at": None, "updated_at": timezone.now()}
        )
        _on_commit_wake(target.id)
    return key


def _key_matches(stored_hash: str, key: object) -> bool:
    if not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH:
        return False
    return hmac.compare_digest(stored_hash, hash_claim_key(key))


def claim_verify(*, target_id: str, subject: str, is_org_admin: bool, key: object, stamp: bool = True) -> str:
    """Check both proofs of a claim or report; return the key's hash.

    Proofs: the caller owns target `target_id` (or is an org admin) AND `key` matches its claim
    key. Any failure — unknown or cross-org target, another member's machine, no key minted,
    a missing, empty, over-128-character or wrong key — raises the same `ClaimRejected` (403).
    With `stamp`, records `serving_at = now` (the dispatch gate's liveness proof).
    """
    try:
        target = target_get(target_id=target_id)
    except TargetNotFound as exc:
        raise ClaimRejected() from exc
    if not can_manage(target, subject=subject, is_org_admin=is_org_admin):
        raise ClaimRejected()
    claim_key = ClaimKey.objects.filter(target_id=target.id).first()
    if claim_key is None or not _key_matches(claim_key.key_hash, key):
        raise ClaimRejected()
    if stamp:
        ClaimKey.objects.filter(target_id=target.id, key_hash=claim_key.key_hash).update(serving_at=timezone.now())
    return claim_key.key_hash


def routed_claim_next(*, target_id: str, key_hash: str) -> RoutedRun | None:
    """Win the oldest open offer for target `target_id`, or return None when there is none.

    Each candidate is taken by one atomic `UPDATE … WHERE claimed_at IS NULL AND <key still
    current>`, so exactly one claimer wins an offer and a superseded key wins nothing. Raises
    `ClaimRejected` when the key was rotated or the target deleted since the claim began.
    Reads only (no write, no transaction) when nothing is waiting.
    """
    current_key = ClaimKey.objects.filter(target_id=target_id, key_hash=key_hash)
    candidates = list(
        RoutedRun.objects.filter(target_id=target_id, state=RoutedRunState.OFFERED).order_by("offered_at", "run_id").values_list("run_id", flat=True)[:8]
    )
    if not current_key.exists():
        raise ClaimRejected()
    for run_id in candidates:
        if _stopped_before_claim(run_id):
            continue
        won = (
            RoutedRun.objects.filter(pk=run_id, state=RoutedRunState.OFFERED, claimed_at__isnull=True)
            .filter(Exists(ClaimKey.objects.filter(target_id=OuterRef("target_id"), key_hash=key_hash)))
            .update(state=RoutedRunState.CLAIMED, claimed_at=timezone.now())
        )
        if won:
            return RoutedRun.objects.get(pk=run_id)
    return None


def _stopped_before_claim(run_id: str) -> bool:
    """Withdraw offer `run_id` if its session was stopped while it waited; return True if so."""
    offer = RoutedRun.objects.filter(pk=run_id, state=RoutedRunState.OFFERED).first()
    if offer is None or not offer.session_id:
        return False
    from sessions.errors import SessionNotFound
    from sessions.selectors import control_commands

    try:
        commands, _ = control_commands(session_id=offer.session_id, after=0)
    except SessionNotFound:  # nothing says the run was stopped
        return False
    if not any(_command_of(event) == ControlCommand.STOP for event in commands):
        return False
    routed_withdraw(run_id=run_id, reason="stopped before a machine claimed it")
    return True


def _command_of(event) -> str:
    try:
        return (json.loads(event.payload or "{}") or {}).get("command", "")
    except (ValueError, AttributeError):
        return ""


def routed_expire(*, target_id: str) -> list[str]:
    """Give up the runs target `target_id` claimed but never reported; return their ids.

    A claimed run is given up once its time limit (`timeoutSeconds` of its offer) plus 60 s has
    passed: the offer is withdrawn and the run recorded as an error. Called when the machine
    claims again (a restarted daemon cannot finish what its predecessor held).
    """
    now = timezone.now()
    expired = []
    for offer in RoutedRun.objects.filter(target_id=target_id, state=RoutedRunState.CLAIMED):
        limit = float((offer.payload or {}).get("timeoutSeconds") or 600) + REPORT_GRACE_SECONDS
        if offer.claimed_at and (now - offer.claimed_at).total_seconds() > limit:
            if routed_withdraw(run_id=offer.run_id, reason=f"the machine did not report the run within {limit:g} s"):
                expired.append(offer.run_id)
    return expired


def routed_release(*, run_id: str) -> bool:
    """Put a won offer back in the mailbox (its claim's answer never reached the machine).

    Returns True if it was released; wakes the target's claims. Unreported runs only.
    """
    row = RoutedRun.objects.filter(pk=run_id).first()
    if row is None:
        return False
    released = RoutedRun.objects.filter(pk=run_id, state=RoutedRunState.CLAIMED, reported_at__isnull=True).update(
        state=RoutedRunState.OFFERED, claimed_at=None
    )
    if released:
        _on_commit_wake(row.target_id)
    return bool(released)


def _refuse_credentials(value: Any, path: str = "payload") -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).replace("-", "_").lower() in CREDENTIAL_KEYS or str(key).lower() in CREDENTIAL_KEYS:
                raise ValueError(f"a routed run carries no credential ({path}.{key})")
            _refuse_credentials(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _refuse_credentials(item, f"{path}[{i}]")


def routed_offer(*, target_id: str, run_id: str, session_id: str, payload: dict) -> RoutedRun:
    """Offer run `run_id` to target `target_id`: a durable row in the (org, target) mailbox.

    `payload` is what the machine's claim receives beside `runId`/`sessionId` (JSON-able, no
    credential: a key named like one raises `ValueError`). A new offer for the same
    (target, session) supersedes a still-unclaimed older one. Offering the same run again to
    the same target while unclaimed refreshes it; otherwise `Conflict` (409). Wakes the
    target's waiting claims after commit. Raises `TargetNotFound` for an unknown target. Call
    the dispatch gate (`selectors.target_dispatchable`) first.
    """
    _refuse_credentials(payload)
    now = timezone.now()
    with transaction.atomic(using=router.db_for_write(RoutedRun)):
        target = target_get(target_id=target_id)
        existing = RoutedRun.objects.filter(pk=run_id).first()
        if existing is not None:
            if existing.target_id != target.id or existing.state != RoutedRunState.OFFERED:
                raise Conflict("this run was already routed")
            existing.payload = payload
            existing.session_id = session_id
            existing.save(update_fields=["payload", "session_id"])
            offer = existing
        else:
            if session_id:
                RoutedRun.objects.filter(target_id=target.id, session_id=session_id, state=RoutedRunState.OFFERED).update(
                    state=RoutedRunState.WITHDRAWN, withdrawn_at=now, result={"error": "superseded by a newer offer"}
                )
            offer = RoutedRun.objects.create(
                run_id=run_id, target_id=target.id, session_id=session_id, payload=payload, state=RoutedRunState.OFFERED, offered_at=now
            )
        _on_commit_wake(target.id)
    return offer


def routed_withdraw(*, run_id: str, reason: str = "the run was stopped") -> RoutedRun | None:
    """Withdraw run `run_id` from its mailbox: no claim can win it, no report settles it.

    The run itself is recorded as an error with `reason` (its session ends `error`; nothing is
    debited). Returns the withdrawn row, or None when the run was never routed or is already
    settled (reported or withdrawn). Idempotent.
    """
    now = timezone.now()
    with transaction.atomic(using=router.db_for_write(RoutedRun)):
        withdrawn = RoutedRun.objects.filter(pk=run_id, state__in=RoutedRunState.OPEN).update(
            state=RoutedRunState.WITHDRAWN, withdrawn_at=now, result={"status": RunStatus.ERROR, "error": reason}
        )
        if not withdrawn:
            return None
        offer = RoutedRun.objects.get(pk=run_id)
        routed_run_settle(run_id=run_id, result=offer.result, target_id=offer.target_id)
    return offer


def routed_report(*, target_id: str, run_id: str, subject: str, is_org_admin: bool, key: object, result: dict | None) -> bool:
    """Settle run `run_id` with the machine's result; return whether it was delivered.

    Both claim proofs are required (`ClaimRejected`, 403). The result is clamped, never refused
    (`sanitize.clean_report`). Only a run this target claimed and nobody settled is delivered
    (True) — and then recorded, its session closed and, if ok, debited (`targets.settle`); an
    unknown, unclaimed, withdrawn or already reported run answers False, so a retried report
    is harmless. Spec 003: POST …/targets/{id}/runs/{runId}/report.
    """
    claim_verify(target_id=target_id, subject=subject, is_org_admin=is_org_admin, key=key, stamp=False)
    report = clean_report(result, ok_word=RunStatus.OK, error_word=RunStatus.ERROR)
    with transaction.atomic(using=router.db_for_write(RoutedRun)):
        delivered = RoutedRun.objects.filter(
            pk=run_id, target_id=target_id, state=RoutedRunState.CLAIMED, reported_at__isnull=True
        ).update(state=RoutedRunState.REPORTED, reported_at=timezone.now(), result=report)
        if delivered:
            routed_run_settle(run_id=run_id, result=report, target_id=target_id)
    return bool(delivered)
