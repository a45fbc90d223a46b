"""Webhook delivery (spec 001, Standard Webhooks): one signed attempt, backoff, dead letter.

An attempt POSTs `{"type": "envelope.created", "timestamp": <RFC 3339>, "data": {envelope_id,
agent_id, user_id, envelope, created_at}}` to the agent's webhook_url with `webhook-id` (the
delivery id, the same on every retry), `webhook-timestamp` (Unix seconds of this attempt) and
`webhook-signature` (`v1,<base64 HMAC-SHA256>` with the secret the agent registered, made by
the `standardwebhooks` package), through `toolkit.outbound` (the connection goes to the address
that was checked; `identity.destinations.webhook_policy`). A 2xx answer succeeds; anything else —
another status, a redirect (never followed), a timeout, a refused address, no secret
registered — fails the attempt. Failed attempt n is retried after `AGENTS_WEBHOOK_RETRY_BASE_SECONDS · 2^(n-1)`
(capped by `AGENTS_WEBHOOK_RETRY_MAX_SECONDS`); after `AGENTS_WEBHOOK_MAX_ATTEMPTS` it is
dead-lettered, kept with its attempt log and replayable. Org context required.
"""

from __future__ import annotations

import json
import time
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from standardwebhooks import Webhook

from agents_site.vocabulary import DeliveryStatus, WebhookEventType
from agents_site.wire import rfc3339
from identity import selectors
from identity.destinations import webhook_policy
from identity.models import Delivery, DeliveryAttempt
from identity.secretbox import decrypt_secret
from tenancy import stores
from toolkit import outbound

MAX_ERROR_CHARS = 500
MAX_ANSWER_BYTES = 16 * 1024  # of a receiver's answer body (it is not kept)


def _setting(name: str, default: float) -> float:
    return float(getattr(settings, name, default))


def backoff_seconds(attempt: int) -> float:
    """Return the wait after failed attempt `attempt` (1-based): base · 2^(attempt-1), capped.

    Example with base 30 s, cap 3600 s: 30, 60, 120, 240, 480, … 3600.
    """
    base = _setting("AGENTS_WEBHOOK_RETRY_BASE_SECONDS", 30)
    cap = _setting("AGENTS_WEBHOOK_RETRY_MAX_SECONDS", 3600)
    return min(cap, base * (2 ** max(0, attempt - 1)))


def webhook_body(delivery: Delivery) -> str:
    """Return the JSON text POSTed for `delivery` (the signed payload)."""
    envelope = delivery.envelope
    return json.dumps(
        {
            "type": str(WebhookEventType.ENVELOPE),
            "timestamp": rfc3339(envelope.created_at),
            "data": {
                "envelope_id": envelope.public_id,
                "agent_id": envelope.agent_id,
                "user_id": envelope.user_id,
                "envelope": envelope.body,
                "created_at": rfc3339(envelope.created_at),
            },
        },
        separators=(",", ":"),
    )


def _claim(delivery_id: str, *, force: bool) -> Delivery | None:
    """Take the next attempt of `delivery_id` if it is open and due; None otherwise.

    The attempt counter is bumped by a conditional update and `next_attempt_at` pushed past the
    attempt's timeout (a lease), so two workers never make the same attempt.
    """
    now = timezone.now()
    row = Delivery.objects.select_related("envelope").filter(public_id=delivery_id).first()
    if row is None or row.status not in DeliveryStatus.OPEN:
        return None
    if not force and row.next_attempt_at is not None and row.next_attempt_at > now:
        return None
    lease = now + timedelta(seconds=_setting("AGENTS_WEBHOOK_TIMEOUT_SECONDS", 10) + 60)
    taken = Delivery.objects.filter(pk=row.pk, attempts=row.attempts, status__in=DeliveryStatus.OPEN).update(
        attempts=row.attempts + 1, next_attempt_at=lease, updated_at=now
    )
    if not taken:
        return None
    row.attempts += 1
    return row


def _post(delivery: Delivery) -> tuple[int | None, str]:
    """Make the HTTP attempt; return `(status code or None, error sentence or "")`."""
    keyset = selectors.signing_keyset(agent_id=delivery.agent_id)
    secret = decrypt_secret(keyset.webhook_secret_encrypted) if keyset else None
    if not secret:
        return None, "the agent has no webhook secret registered"
    body = webhook_body(delivery)
    now = timezone.now()
    headers = {
        "content-type": "application/json",
        "user-agent": "agents-identity-webhooks/1",
        "webhook-id": delivery.public_id,
        "webhook-timestamp": str(int(now.timestamp())),
        "webhook-signature": Webhook(secret).sign(delivery.public_id, now, body),
    }
    try:
        response = outbound.request(webhook_policy(), "POST", delivery.url, headers=headers, content=body.encode(),
                                    timeout=_setting("AGENTS_WEBHOOK_TIMEOUT_SECONDS", 10), max_bytes=MAX_ANSWER_BYTES)
    except outbound.Refused as exc:
        return None, f"refused destination: {exc}"
    except outbound.TimedOut:
        return None, "timed out"
    except outbound.Failed as exc:
        return None, f"request failed: {exc}"
    if 200 <= response.status_code < 300:
        return response.status_code, ""
    if 300 <= response.status_code < 400:
        return response.status_code, "redirects are not followed"
    return response.status_code, f"the receiver answered {response.status_code}"


def delivery_attempt(*, delivery_id: str, force: bool = False) -> Delivery | None:
    """Make one attempt of delivery `delivery_id` if it is due (or `force`); return it after.

    Returns None when there was nothing to attempt (unknown, finished, not due, or taken by
    another worker). Records the attempt and the new status: succeeded, retrying (with
    `next_attempt_at`) or dead.
    """
    row = _claim(delivery_id, force=force)
    if row is None:
        return None
    started = time.monotonic()
    status_code, error = _post(row)
    duration_ms = int((time.monotonic() - started) * 1000)
    now = timezone.now()
    max_attempts = int(getattr(settings, "AGENTS_WEBHOOK_MAX_ATTEMPTS", 6))
    with stores.org_atomic():
        DeliveryAttempt.objects.create(
            delivery=row, number=row.attempts, status_code=status_code, error=error[:MAX_ERROR_CHARS], duration_ms=duration_ms, created_at=now
        )
        fields = {"last_status_code": status_code, "last_error": error[:MAX_ERROR_CHARS], "updated_at": now}
        if not error:
            fields.update(status=DeliveryStatus.SUCCEEDED, delivered_at=now, next_attempt_at=None)
        elif row.attempts >= max_attempts:
            fields.update(status=DeliveryStatus.DEAD, next_attempt_at=None)
        else:
            fields.update(status=DeliveryStatus.RETRYING, next_attempt_at=now + timedelta(seconds=backoff_seconds(row.attempts)))
        # Only while still open: a cascade delete may have cancelled it meanwhile.
        Delivery.objects.filter(pk=row.pk, status__in=DeliveryStatus.OPEN).update(**fields)
    return Delivery.objects.select_related("envelope").get(pk=row.pk)


def deliveries_due(*, now=None, limit: int = 200) -> list[str]:
    """Return the ids of open deliveries whose next attempt is due, oldest first."""
    now = now or timezone.now()
    return list(
        Delivery.objects.filter(status__in=DeliveryStatus.OPEN, next_attempt_at__lte=now)
        .order_by("next_attempt_at", "id")
        .values_list("public_id", flat=True)[:limit]
    )
