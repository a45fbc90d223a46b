"""Claim keys and the two proofs of a claim or report (spec 003: POST …/{id}/key; reference §1.8).

A key is `tgtk_` + 64 hex, shown once; only its SHA-256 is stored. A claim or report needs
both proofs — the caller owns the machine (or is an org admin) AND presents its key — and any
failure is the same 403. Org context required.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets

from django.utils import timezone

from targets import wake
from targets.errors import ClaimRejected, TargetNotFound
from targets.models import ClaimKey
from targets.selectors import can_manage, target_get, target_get_managed
from tenancy import stores

MAX_KEY_LENGTH = 128
CLAIM_KEY_PREFIX = "tgtk_"
# A claim re-stamps `serving_at` only when the stamp is older than this (seconds): a third of
# the dispatch gate's 90 s window, so a daemon claiming every 25 s always passes the gate while
# most claims (and a reconnecting fleet) write nothing.
SERVING_STAMP_SECONDS = 30


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
    with stores.org_atomic():
        target = target_get_managed(target_id=target_id, subject=subject, is_org_admin=is_org_admin)
        ClaimKey.objects.update_or_create(
            target=target, defaults={"key_hash": hash_claim_key(key), "serving_at": None, "updated_at": timezone.now()}
        )
        wake.notify_on_commit(target_id=target.id)
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
    With `stamp`, records `serving_at = now` (the dispatch gate's liveness proof) when the stored
    stamp is missing or older than `SERVING_STAMP_SECONDS`; a fresher one is left as it is, so
    a claim is a read, not a write, on the waiting path.
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
    now = timezone.now()
    if stamp and (claim_key.serving_at is None or (now - claim_key.serving_at).total_seconds() > SERVING_STAMP_SECONDS):
        ClaimKey.objects.filter(target_id=target.id, key_hash=claim_key.key_hash).update(serving_at=now)
    return claim_key.key_hash


