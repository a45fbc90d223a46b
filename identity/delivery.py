"""Webhook delivery to identity agents (spec 001, Standard Webhooks), made by the shared engine.

The attempts, signing, retry schedule, attempt log and dead letter are `webhooks.engine`'s
(channel `identity`, registered in `identity.apps`); this module says what an identity delivery
carries and which secret signs it. A delivery POSTs `{"type", "timestamp", "data"}` to the
agent's webhook_url: `envelope.created` (`data`: envelope_id, agent_id, user_id, envelope,
created_at) or `security_alert` (`data`: code, agent_id and the alert's fields; the system
messages WebSocket-mode agents get on their socket). It is signed with the webhook secret the
agent registered (no secret registered: the attempt fails). Org context required.
"""

from __future__ import annotations

from agents_site.vocabulary import WebhookChannel, WebhookEventType
from agents_site.wire import rfc3339
from identity import selectors
from identity.models import Delivery, DeliveryAttempt
from identity.secretbox import decrypt_secret
from webhooks import engine

backoff_seconds = engine.retry_delay  # the engine's schedule (kept under its old name)


def envelope_data(envelope) -> dict:
    """Return the `data` of an `envelope.created` body for `envelope`."""
    return {
        "envelope_id": envelope.public_id,
        "agent_id": envelope.agent_id,
        "user_id": envelope.user_id,
        "envelope": envelope.body,
        "created_at": rfc3339(envelope.created_at),
    }


def webhook_body(delivery: Delivery) -> str:
    """Return the JSON text POSTed for `delivery` (the signed payload, fixed at creation)."""
    if delivery.payload:
        return delivery.payload
    envelope = delivery.envelope
    return engine.event_body(WebhookEventType.ENVELOPE, envelope_data(envelope), at=envelope.created_at)


def delivery_secret(delivery: Delivery) -> str | None:
    """Return the `whsec_…` secret the delivery's agent registered, or None."""
    keyset = selectors.signing_keyset(agent_id=delivery.agent_id)
    return decrypt_secret(keyset.webhook_secret_encrypted) if keyset else None


def channel() -> engine.Channel:
    """Return the engine channel of identity deliveries."""
    return engine.Channel(name=str(WebhookChannel.IDENTITY), delivery_model=Delivery, attempt_model=DeliveryAttempt,
                          secret=delivery_secret)


def delivery_attempt(*, delivery_id: str, force: bool = False) -> Delivery | None:
    """Make one attempt of delivery `delivery_id` if it is due (or `force`); return it after (`engine.attempt`)."""
    row = engine.attempt(WebhookChannel.IDENTITY, delivery_id, force=force)
    return Delivery.objects.select_related("envelope").get(pk=row.pk) if row is not None else None


def deliveries_due(*, limit: int = 200) -> list[str]:
    """Return the ids of open identity deliveries whose next attempt is due, oldest first."""
    return engine.deliveries_due(WebhookChannel.IDENTITY, limit=limit)
