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

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from runs.models import Approval, Run
from runs.lifecycle import stop_reason
from agents_site.errors import Conflict
from agents_site.vocabulary import ApprovalState, ControlCommand, RoutedRunState, RunStatus
from targets import approvals, wake
from targets.errors import ClaimRejected
from targets.keys import claim_verify
from targets.models import ClaimKey, RoutedRun
from targets.sanitize import clean_report
from targets.selectors import target_get
from targets.settle import routed_run_settle
from tenancy import stores
from sessions.errors import SessionNotFound
from sessions.selectors import control_commands

#: The error of a routed run whose machine claimed it and never reported in time.
NOT_REPORTED = "the machine did not report the run in time"
#: The error of a routed run stopped before any machine claimed it.
STOPPED_BEFORE_CLAIM = "stopped before a machine claimed it"
#: Keys a routed run's payload may never carry: the machine uses its own credentials.
#: A withdrawn run ends whether it runs on its machine or waits for a person there.
_UNFINISHED = frozenset({RunStatus.RUNNING, RunStatus.WAITING})
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
            offer = RoutedRun.objects.get(pk=run_id)
            if approvals.resume_claimed(offer):  # a run resumed after its approvals: taken with its calls
                return offer
    return None


def _stopped_before_claim(run_id: str) -> bool:
    """Withdraw offer `run_id` if its session was stopped while it waited; return True if so."""
    offer = RoutedRun.objects.filter(pk=run_id, state=RoutedRunState.OFFERED).first()
    if offer is None or not offer.session_id:
        return False

    try:
        commands, _ = control_commands(session_id=offer.session_id, after=0)
    except SessionNotFound:  # nothing says the run was stopped
        return False
    stop = next((event for event in commands if _command_of(event) == ControlCommand.STOP), None)
    if stop is None:
        return False
    routed_withdraw(run_id=run_id, reason=stop_reason(STOPPED_BEFORE_CLAIM, _message_of(stop)))
    return True


def _command_of(event) -> str:
    try:
        return (json.loads(event.payload or "{}") or {}).get("command", "")
    except (ValueError, AttributeError):
        return ""


def _message_of(event) -> str | None:
    try:
        return (json.loads(event.payload or "{}") or {}).get("message")
    except (ValueError, AttributeError):
        return None


def report_deadline_seconds(offer: RoutedRun) -> float:
    """Return the seconds a machine has to report `offer` after claiming it.

    The offer's own `timeoutSeconds` (default `AGENTS_ROUTED_RUN_TIMEOUT_SECONDS`) plus
    `AGENTS_ROUTED_RUN_GRACE_SECONDS`.
    """
    timeout = (offer.payload or {}).get("timeoutSeconds") or settings.AGENTS_ROUTED_RUN_TIMEOUT_SECONDS
    return float(timeout) + float(settings.AGENTS_ROUTED_RUN_GRACE_SECONDS)


def routed_expire(*, target_id: str | None = None) -> list[str]:
    """Give up the runs claimed but never reported in time; return their ids.

    A claimed run is given up once its time limit plus its grace (`report_deadline_seconds`)
    has passed since the claim: the offer is withdrawn and the run ends `error` "the machine
    did not report the run in time", unbilled — whether or not the machine ever returns (a
    late report then answers `delivered: false`). Run by the periodic sweep for every target
    of the org (`target_id` None) and when a machine claims again (its own target).
    """
    now = timezone.now()
    expired = []
    offers = RoutedRun.objects.filter(state=RoutedRunState.CLAIMED)
    if target_id is not None:
        offers = offers.filter(target_id=target_id)
    for offer in offers.only("run_id", "payload", "claimed_at"):
        limit = report_deadline_seconds(offer)
        if offer.claimed_at and (now - offer.claimed_at).total_seconds() > limit:
            if routed_withdraw(run_id=offer.run_id, reason=NOT_REPORTED):
                expired.append(offer.run_id)
    return expired


def routed_release(*, run_id: str) -> bool:
    """Put a won offer back in the mailbox (its claim's answer never reached the machine).

    Returns True if it was released; wakes the target's claims. Unreported runs only.
    """
    row = RoutedRun.objects.filter(pk=run_id).first()
    if row is None:
        return False
    with stores.org_atomic():
        released = RoutedRun.objects.filter(pk=run_id, state=RoutedRunState.CLAIMED, reported_at__isnull=True).update(
            state=RoutedRunState.OFFERED, claimed_at=None
        )
        if released:
            approvals.resume_released(run_id=run_id)  # a resumed run's calls were never handed over
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
        routed_run_settle(run_id=run_id, result=offer.result, target_id=offer.target_id, from_statuses=_UNFINISHED)
        Approval.objects.filter(run_id=run_id, state__in=ApprovalState.OPEN | ApprovalState.DECIDED | {ApprovalState.WAITING}).update(
            state=ApprovalState.CANCELLED)
    return offer


def routed_stop_command(*, session, command: str, message: str | None = None) -> bool:
    """Withdraw the unclaimed offer of the routed run in `session` on a `stop`.

    Registered with `sessions.control` (called when the session has no live executor). Returns
    True when an offer was withdrawn (the run recorded `error` "stopped before a machine
    claimed it", then `: <message>` when the stop gave one; no debit); False for any other
    command, when there is no offer, or when a machine already claimed it (its runner reads
    the stop from the session's control feed). Org context required.
    """
    if command != ControlCommand.STOP or not session.target:
        return False
    run_id = RoutedRun.objects.filter(session_id=session.id, state=RoutedRunState.OFFERED).values_list("run_id", flat=True).first()
    return bool(run_id and routed_withdraw(run_id=run_id, reason=stop_reason(STOPPED_BEFORE_CLAIM, message)))


def routed_report(*, target_id: str, run_id: str, subject: str, is_org_admin: bool, key: object, result: dict | None) -> bool:
    """Settle run `run_id` with the machine's result; return whether it was delivered.

    Both claim proofs are required (`ClaimRejected`, 403). The result is clamped, never refused
    (`sanitize.clean_report`). Only a run this target claimed and nobody settled is delivered
    (True) — and then recorded, its session closed and, if ok, debited (`targets.settle`); an
    unknown, unclaimed, withdrawn or already reported run answers False, so a retried report
    is harmless. `run_id` may also be the routed run's session id (the public implementation
    matches the session: a runner that knows only the session it streamed into can report).
    Spec 003: POST …/targets/{id}/runs/{runId}/report.
    """
    claim_verify(target_id=target_id, subject=subject, is_org_admin=is_org_admin, key=key, stamp=False)
    report = clean_report(result, ok_word=RunStatus.OK, error_word=RunStatus.ERROR)
    if not RoutedRun.objects.filter(pk=run_id, target_id=target_id).exists():
        by_session = RoutedRun.objects.filter(session_id=run_id, target_id=target_id).order_by("-offered_at").values_list("run_id", flat=True).first()
        run_id = by_session or run_id
    if (result or {}).get("status") == RunStatus.WAITING:  # the machine asks a person (issue 28) and lets go
        return approvals.routed_wait(target_id=target_id, run_id=run_id, waiting=(result or {}).get("waiting"), report=report)
    with stores.org_atomic():
        approvals.turn_settled(run_id=run_id)
        delivered = RoutedRun.objects.filter(
            pk=run_id, target_id=target_id, state=RoutedRunState.CLAIMED, reported_at__isnull=True
        ).update(state=RoutedRunState.REPORTED, reported_at=timezone.now(), result=report)
        if delivered and routed_run_settle(run_id=run_id, result=report, target_id=target_id) is None:
            # The run was finished meanwhile (recovery's "worker lost"): nothing moved, not delivered.
            delivered = not Run.objects.filter(pk=run_id).exists()
    return bool(delivered)
