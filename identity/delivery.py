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

from agents_site.vocabulary import ConnectionMode, DeliveryStatus, WebhookChannel, WebhookEventType
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
    """Return the `whsec_…` secret signing `delivery`: the one kept on it (an alert after an
    emergency rotation), else the one its agent registered; None when there is none."""
    if delivery.signing_secret_encrypted:
        return decrypt_secret(delivery.signing_secret_encrypted)
    keyset = selectors.signing_keyset(agent_id=delivery.agent_id)
    return decrypt_secret(keyset.webhook_secret_encrypted) if keyset else None


def alert_delivery(*, profile, code: str, data: dict, secret_encrypted: str = "") -> Delivery | None:
    """Queue a `security_alert` `{code, agent_id, **data}` to a webhook-mode agent (after commit); None for another mode.

    The same system message a WebSocket-mode agent gets on its socket (`identity.live.alert_agent`).
    `secret_encrypted`: sign with this secret rather than the agent's current one. Inside the
    caller's org transaction.
    """
    if profile.connection_mode != ConnectionMode.WEBHOOK or not profile.webhook_url:
        return None
    at = engine.now()
    body = engine.event_body(WebhookEventType.SECURITY_ALERT, {"code": str(code), "agent_id": profile.agent_id, **data}, at=at)
    row = Delivery.objects.create(
        public_id=engine.new_message_id(), agent_id=profile.agent_id, envelope=None, url=profile.webhook_url,
        event_type=WebhookEventType.SECURITY_ALERT, payload=body, signing_secret_encrypted=secret_encrypted,
        status=DeliveryStatus.PENDING, next_attempt_at=at, created_at=at, updated_at=at,
    )
    engine.on_commit_enqueue(WebhookChannel.IDENTITY, [row.public_id])
    return row


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
