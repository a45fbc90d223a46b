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
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import IdempotencyRecord, Run
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


def _answer(record: IdempotencyRecord, digest: str) -> Run | None:
    if record.request_hash != digest:
        raise IdempotencyMismatch()
    run = Run.objects.filter(pk=record.run_id).first()
    if run is None:  # the agent and its runs were deleted: the key is free again
        record.delete()
        return None
    if run.status in RunStatus.IN_FLIGHT:
        raise IdempotencyInProgress()
    return run


def replay(*, key: str, digest: str) -> Run | None:
    """Return the run first answered for `key`, or None when the key is unused (or expired).

    Raises `IdempotencyMismatch` or `IdempotencyInProgress` (409).
    """
    record = IdempotencyRecord.objects.filter(key=key, created_at__gte=_cutoff()).first()
    return _answer(record, digest) if record else None


def reserve(*, key: str, digest: str, run_id: str) -> Run | None:
    """Bind `key` to `run_id` (call in the transaction that creates the run); return None.

    When another request bound the key first (a race), return that request's run or raise its
    409, exactly as `replay` would. Expired records of the key are purged first.
    """
    IdempotencyRecord.objects.filter(created_at__lt=_cutoff()).delete()
    try:
        with transaction.atomic():
            IdempotencyRecord.objects.create(key=key, request_hash=digest, run_id=run_id, created_at=timezone.now())
    except IntegrityError:
        run = _answer(IdempotencyRecord.objects.get(key=key), digest)
        if run is None:
            raise IdempotencyInProgress() from None
        return run
    return None
