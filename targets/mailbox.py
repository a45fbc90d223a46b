"""The routed-run mailbox, durable in the org's store and keyed (org, target) (DESIGN §6).

The run path offers (`routed_offer`); a machine's claim wins an offer by one atomic
`UPDATE … WHERE claimed_at IS NULL` (`routed_claim_next`); its report settles it
(`routed_report`); a stop, a deleted machine or a claim held past its time withdraws it
(`routed_withdraw`, `routed_expire`). Every offer wakes the target's waiting claims after it
commits. Reference §1.9, §2.4. Org context required.
"""

from __future__ import annotations

import json
from typing import Any

from django.db.models import Exists, OuterRef
from django.utils import timezone

from agents.models import Run
from agents_site.errors import Conflict
from agents_site.vocabulary import ControlCommand, RoutedRunState, RunStatus
from targets import wake
from targets.errors import ClaimRejected
from targets.keys import claim_verify
from targets.models import ClaimKey, RoutedRun
from targets.sanitize import clean_report
from targets.selectors import target_get
from targets.settle import routed_run_settle
from tenancy import stores

#: Seconds past a routed run's own time limit after which an unreported claim is given up.
REPORT_GRACE_SECONDS = 60
#: Keys a routed run's payload may never carry: the machine uses its own credentials.
CREDENTIAL_KEYS = frozenset({"apikey", "api_key", "authorization", "token", "secret", "password", "credential", "claimkey"})


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
        wake.notify_on_commit(target_id=row.target_id)
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
    with stores.org_atomic():
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
        wake.notify_on_commit(target_id=target.id)
    return offer


def routed_withdraw(*, run_id: str, reason: str = "the run was stopped") -> RoutedRun | None:
    """Withdraw run `run_id` from its mailbox: no claim can win it, no report settles it.

    The run itself is recorded as an error with `reason` (its session ends `error`; nothing is
    debited). Returns the withdrawn row, or None when the run was never routed or is already
    settled (reported or withdrawn). Idempotent.
    """
    now = timezone.now()
    with stores.org_atomic():
        withdrawn = RoutedRun.objects.filter(pk=run_id, state__in=RoutedRunState.OPEN).update(
            state=RoutedRunState.WITHDRAWN, withdrawn_at=now, result={"status": RunStatus.ERROR, "error": reason}
        )
        if not withdrawn:
            return None
        offer = RoutedRun.objects.get(pk=run_id)
        routed_run_settle(run_id=run_id, result=offer.result, target_id=offer.target_id)
    return offer


def routed_stop(*, session_id: str) -> bool:
    """Withdraw the unclaimed offer of the routed run in session `session_id` on a `stop`.

    Called by `sessions.control.control_send` when the session has no live executor. Returns
    True when an offer was withdrawn (the run recorded `error` "stopped before a machine
    claimed it", no debit); False when there is none or a machine already claimed it (its
    runner reads the stop from the session's control feed). Org context required.
    """
    run_id = RoutedRun.objects.filter(session_id=session_id, state=RoutedRunState.OFFERED).values_list("run_id", flat=True).first()
    return bool(run_id and routed_withdraw(run_id=run_id, reason="stopped before a machine claimed it"))


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
    with stores.org_atomic():
        delivered = RoutedRun.objects.filter(
            pk=run_id, target_id=target_id, state=RoutedRunState.CLAIMED, reported_at__isnull=True
        ).update(state=RoutedRunState.REPORTED, reported_at=timezone.now(), result=report)
        if delivered and routed_run_settle(run_id=run_id, result=report, target_id=target_id) is None:
            # The run was finished meanwhile (recovery's "worker lost"): nothing moved, not delivered.
            delivered = not Run.objects.filter(pk=run_id).exists()
    return bool(delivered)
