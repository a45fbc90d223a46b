"""`Idempotency-Key` on POST …/run: one execution, one debit per key (issue 4 item 6).

Same key and same request (agent and input) within `AGENTS_IDEMPOTENCY_TTL_SECONDS` (24 h) →
the original run, not a second execution or debit. Same key, different request → 409
`idempotency_mismatch`. Same key while the first run is still running → 409
`idempotency_in_progress`. Records live in the org's store (`IdempotencyRecord`). Org context
required.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from runs.models import IdempotencyRecord, Run
from agents_site.errors import Conflict, InvalidRequest
from agents_site.vocabulary import ErrorCode, RunStatus

MAX_KEY_LENGTH = 255


class IdempotencyMismatch(Conflict):
    """409: the key was first used with a different request."""

    code = ErrorCode.IDEMPOTENCY_MISMATCH
    default_message = "this Idempotency-Key was already used with a different request"


class IdempotencyInProgress(Conflict):
    """409: the key's first run has not finished; retry once it has."""

    code = ErrorCode.IDEMPOTENCY_IN_PROGRESS
    default_message = "the run of this Idempotency-Key is still in progress; retry when it has finished"


def clean_key(key: str | None) -> str:
    """Return `key` trimmed ("" when absent); raise `InvalidRequest` over 255 characters."""
    key = (key or "").strip()
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidRequest(f"Idempotency-Key is at most {MAX_KEY_LENGTH} characters")
    return key


def request_hash(*, agent_id: str, input: str) -> str:
    """Return the SHA-256 hex identifying a run request (the agent and the exact input)."""
    return hashlib.sha256(json.dumps([agent_id, input], ensure_ascii=False).encode()).hexdigest()


def _cutoff():
    return timezone.now() - timedelta(seconds=settings.AGENTS_IDEMPOTENCY_TTL_SECONDS)


def _answer(record: IdempotencyRecord, digest: str, *, in_flight: bool) -> Run | None:
    if record.request_hash != digest:
        raise IdempotencyMismatch()
    run = Run.objects.filter(pk=record.run_id).first()
    if run is None:  # the agent and its runs were deleted: the key is free again
        record.delete()
        return None
    if run.status in RunStatus.IN_FLIGHT and not in_flight:
        raise IdempotencyInProgress()
    return run


def replay(*, key: str, digest: str, in_flight: bool = False) -> Run | None:
    """Return the run first answered for `key`, or None when the key is unused (or expired).

    `in_flight=True` (a background or routed run, answered 202 while it runs) returns a run
    still queued or running; otherwise such a run is 409 `IdempotencyInProgress`. Raises
    `IdempotencyMismatch` (409) when the key was used with another request.
    """
    record = IdempotencyRecord.objects.filter(key=key, created_at__gte=_cutoff()).first()
    return _answer(record, digest, in_flight=in_flight) if record else None


def reserve(*, key: str, digest: str, run_id: str, in_flight: bool = False) -> Run | None:
    """Bind `key` to `run_id`, or return the run another request bound it to first.

    Call inside the serialised org-store transaction that creates the run
    (`stores.org_atomic(serialize=True)`): requests of one org pass through it one at a
    time, so the record is read and written with no race and no savepoint. Returns None when
    `key` is now bound to `run_id`; the earlier run (or its 409, exactly as `replay` with the
    same `in_flight`) when it was bound before. Expired records are purged first.
    """
    IdempotencyRecord.objects.filter(created_at__lt=_cutoff()).delete()
    record = IdempotencyRecord.objects.filter(key=key).first()
    if record is not None:
        earlier = _answer(record, digest, in_flight=in_flight)
        if earlier is not None:
            return earlier
    IdempotencyRecord.objects.create(key=key, request_hash=digest, run_id=run_id, created_at=timezone.now())
    return None
