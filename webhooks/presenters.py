"""Wire views of org webhook endpoints and their deliveries (never the secret, except where asked)."""

from __future__ import annotations

from agents_site.wire import rfc3339


def _compact(view: dict) -> dict:
    return {k: v for k, v in view.items() if v is not None}


def endpoint_view(endpoint, *, secret: str | None = None) -> dict:
    """Return `{id, url, events, description, enabled, disabledReason?, failingSince?, createdAt, updatedAt, secret?}`."""
    return _compact({
        "id": endpoint.public_id,
        "url": endpoint.url,
        "events": list(endpoint.events or []),
        "description": endpoint.description,
        "enabled": endpoint.enabled,
        "disabledReason": endpoint.disabled_reason or None,
        "failingSince": rfc3339(endpoint.failing_since) if endpoint.failing_since else None,
        "createdAt": rfc3339(endpoint.created_at),
        "updatedAt": rfc3339(endpoint.updated_at),
        "secret": secret,
    })


def attempt_view(attempt) -> dict:
    """Return `{number, statusCode?, error?, responseBody?, durationMs, createdAt}`."""
    return _compact({
        "number": attempt.number,
        "statusCode": attempt.status_code,
        "error": attempt.error or None,
        "responseBody": attempt.response_body or None,
        "durationMs": attempt.duration_ms,
        "createdAt": rfc3339(attempt.created_at),
    })


def delivery_view(delivery) -> dict:
    """Return a delivery with its attempt log (`DeliveryOut`)."""
    return _compact({
        "id": delivery.public_id,
        "endpointId": delivery.endpoint.public_id,
        "eventId": delivery.event_id,
        "type": delivery.event_type,
        "url": delivery.url,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "lastStatusCode": delivery.last_status_code,
        "lastError": delivery.last_error or None,
        "nextAttemptAt": rfc3339(delivery.next_attempt_at) if delivery.next_attempt_at else None,
        "createdAt": rfc3339(delivery.created_at),
        "deliveredAt": rfc3339(delivery.delivered_at) if delivery.delivered_at else None,
        "attemptLog": [attempt_view(a) for a in delivery.attempt_log.all()],
    })
