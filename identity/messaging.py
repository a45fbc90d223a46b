"""Envelopes through the blind pipe (spec 001, docs/envelopes.md v1): user → agent, agent → user.

The platform stores and forwards an envelope and never decrypts it. It checks the outer shape
only (`identity.envelope_format`): a v1 envelope of at most `AGENTS_ENVELOPE_MAX_BYTES`, whose
header names the sender and recipient this request routes between, sealed to a current or
in-grace X25519 key of the recipient and signed with a current or in-grace Ed25519 key of the
sender (400 `envelope_key_unknown` otherwise), with a (sender, message id) never accepted
before (409 `envelope_replayed`). A webhook agent's envelope gets a `Delivery` (signed POSTs,
retried); a WebSocket agent's waits, unacknowledged, until its connection takes it. An envelope
for a user lands in their inbox. Org context required.
"""

from __future__ import annotations

import secrets

from django.db import IntegrityError, transaction
from django.utils import timezone

from agents_site.errors import Conflict, InvalidRequest, NotFound
from agents_site.vocabulary import ConnectionMode, DeliveryStatus, EnvelopeDirection, EnvelopeParty, InboxItemKind, WebhookChannel, WebhookEventType
from identity import live, selectors
from identity.delivery import envelope_data
from identity.envelope_format import OuterShape, outer_shape
from identity.errors import EnvelopeKeyUnknown, EnvelopeReplayed
from identity.models import Delivery, Envelope, IdentityProfile, InboxItem
from identity.services import lock_key
from tenancy import stores
from webhooks import engine


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


def check_envelope(envelope: object, *, sender: tuple[str, str], recipient: tuple[str, str], recipient_keys, sender_keys) -> OuterShape:
    """Return the outer shape of `envelope` once it passes every routing check (see module doc).

    `sender`/`recipient`: `(EnvelopeParty, id)` the request routes between. `recipient_keys` /
    `sender_keys`: the parties' key sets (`identity.selectors.*_key_history`). Raises
    `InvalidRequest` (400), `PayloadTooLarge` (413), `EnvelopeKeyUnknown` (400) or
    `EnvelopeReplayed` (409). Reads only; the caller stores.
    """
    shape = outer_shape(envelope)
    if (shape.recipient_type, shape.recipient_id) != recipient:
        raise InvalidRequest(f"the envelope is addressed to {shape.recipient_type} {shape.recipient_id}, not to {recipient[0]} {recipient[1]}",
                             fields=[{"field": "envelope", "message": "header.to does not name the recipient"}])
    if (shape.sender_type, shape.sender_id) != sender:
        raise InvalidRequest(f"the envelope names {shape.sender_type} {shape.sender_id} as its sender, not you ({sender[0]} {sender[1]})",
                             fields=[{"field": "envelope", "message": "header.from does not name the sender"}])
    sealing, _ = selectors.valid_key_ids(recipient_keys)
    if not sealing:
        raise EnvelopeKeyUnknown(f"the {recipient[0]} {recipient[1]} has no registered keys to seal to", key_id=shape.rkid, party="recipient")
    if shape.rkid not in sealing:
        raise EnvelopeKeyUnknown(f"the envelope is sealed to key {shape.rkid}, which is not a current or in-grace key of the {recipient[0]} "
                                 "(it was rotated: fetch the keys again and seal to the current one)", key_id=shape.rkid, party="recipient")
    _, signing = selectors.valid_key_ids(sender_keys)
    if shape.skid not in signing:
        hint = "register your keys (PUT /v1/identity/users/me/keys)" if sender[0] == EnvelopeParty.USER else "register the agent's keys"
        raise EnvelopeKeyUnknown(f"the envelope is signed with key {shape.skid}, which is not a current or in-grace signing key of yours: {hint}",
                                 key_id=shape.skid, party="sender")
    if Envelope.objects.filter(sender=shape.sender, message_id=shape.message_id).exists():
        raise EnvelopeReplayed(f"an envelope with message id {shape.message_id} from you was already accepted", message_id=shape.message_id)
    return shape


def _create(shape: OuterShape, **fields) -> Envelope:
    try:
        with stores.org_atomic():
            return Envelope.objects.create(sender=shape.sender, message_id=shape.message_id, size_bytes=shape.size_bytes, **fields)
    except IntegrityError:  # a concurrent request took this (sender, message id) first
        raise EnvelopeReplayed(f"an envelope with message id {shape.message_id} from you was already accepted", message_id=shape.message_id) from None


def envelope_to_agent(*, profile: IdentityProfile, user_id: str, envelope: object) -> tuple[Envelope, Delivery | None]:
    """Store `user_id`'s envelope for `profile`'s agent and queue its delivery; return both.

    Webhook mode: a pending `Delivery` is created in the same transaction and its first attempt
    queued on the task engine after commit. WebSocket mode: the agent's connections are woken
    after commit (the envelope waits until acknowledged). 400/409/413 as `check_envelope`.
    """
    shape = check_envelope(
        envelope, sender=(EnvelopeParty.USER, user_id), recipient=(EnvelopeParty.AGENT, profile.agent_id),
        recipient_keys=selectors.agent_key_history(agent_id=profile.agent_id), sender_keys=selectors.user_key_history(user_id=user_id),
    )
    org = stores.current_org()
    now = timezone.now()
    delivery = None
    with stores.org_atomic():
        row = _create(shape, public_id=_new_id("env"), direction=EnvelopeDirection.TO_AGENT, agent_id=profile.agent_id,
                      user_id=user_id, body=envelope.strip(), created_at=now)
        if profile.connection_mode == ConnectionMode.WEBHOOK:
            delivery = Delivery.objects.create(
                public_id=_new_id("msg"), agent_id=profile.agent_id, envelope=row, url=profile.webhook_url,
                event_type=WebhookEventType.ENVELOPE, payload=engine.event_body(WebhookEventType.ENVELOPE, envelope_data(row), at=now),
                status=DeliveryStatus.PENDING, next_attempt_at=now, created_at=now, updated_at=now,
            )
            engine.on_commit_enqueue(WebhookChannel.IDENTITY, [delivery.public_id])
        else:
            transaction.on_commit(lambda: live.wake_agent(org, profile.agent_id), using=stores.current_alias())
    return row, delivery


def envelope_to_user(*, agent_id: str, user_id: str, envelope: object) -> tuple[Envelope, InboxItem]:
    """Store agent `agent_id`'s envelope in `user_id`'s inbox; return `(envelope, inbox item)`.

    Only to a user with an active relation with the agent; anyone else is a 404 (the agent
    cannot tell an unknown user from one who never added it). 400/409/413 as `check_envelope`.
    """
    user_id = (user_id or "").strip()
    if not user_id or len(user_id) > 300 or not selectors.has_active_relation(agent_id=agent_id, user_id=user_id):
        raise NotFound("user not found")
    shape = check_envelope(
        envelope, sender=(EnvelopeParty.AGENT, agent_id), recipient=(EnvelopeParty.USER, user_id),
        recipient_keys=selectors.user_key_history(user_id=user_id), sender_keys=selectors.agent_key_history(agent_id=agent_id),
    )
    org = stores.current_org()
    now = timezone.now()
    with stores.org_atomic():
        lock_key("identity-inbox:" + user_id)  # inbox ids commit in id order per user (the SSE cursor)
        if not selectors.has_active_relation(agent_id=agent_id, user_id=user_id):
            raise NotFound("user not found")
        row = _create(shape, public_id=_new_id("env"), direction=EnvelopeDirection.TO_USER, agent_id=agent_id,
                      user_id=user_id, body=envelope.strip(), created_at=now)
        item = InboxItem.objects.create(user_id=user_id, kind=InboxItemKind.ENVELOPE, agent_id=agent_id, envelope=row, created_at=now)
        transaction.on_commit(lambda: live.wake_inbox(org, user_id), using=stores.current_alias())
    return row, item


def envelopes_ack(*, agent_id: str, public_ids: list[str]) -> int:
    """Mark `agent_id`'s envelopes `public_ids` acknowledged (WebSocket); return how many changed."""
    ids = [p for p in public_ids if isinstance(p, str)][:500]
    with stores.org_atomic():
        return Envelope.objects.filter(agent_id=agent_id, direction=EnvelopeDirection.TO_AGENT, public_id__in=ids, acked_at__isnull=True).update(
            acked_at=timezone.now()
        )


def enqueue_delivery(org: str, delivery_id: str) -> None:
    """Queue one attempt of delivery `delivery_id` of org `org` on the webhook engine (never raises)."""
    engine.enqueue(org, WebhookChannel.IDENTITY, [delivery_id])


def delivery_replay(*, delivery: Delivery, profile: IdentityProfile) -> Delivery:
    """Queue a new delivery of `delivery`'s envelope to the agent's current webhook_url (202).

    Only a finished delivery (succeeded, dead, cancelled) of a webhook agent; 409 otherwise.
    """
    if delivery.status in DeliveryStatus.OPEN:
        raise Conflict("the delivery is still being attempted")
    if profile.connection_mode != ConnectionMode.WEBHOOK or not profile.webhook_url:
        raise Conflict("the agent is not in webhook mode")
    now = timezone.now()
    with stores.org_atomic():
        replay = Delivery.objects.create(
            public_id=_new_id("msg"), agent_id=delivery.agent_id, envelope_id=delivery.envelope_id, url=profile.webhook_url,
            event_type=delivery.event_type, payload=delivery.payload,
            status=DeliveryStatus.PENDING, next_attempt_at=now, created_at=now, updated_at=now,
        )
        engine.on_commit_enqueue(WebhookChannel.IDENTITY, [replay.public_id])
    return replay


def envelopes_purge(*, now=None) -> int:
    """Delete envelopes (with their deliveries and inbox items) older than the retention; return how many."""
    from datetime import timedelta

    cutoff = (now or timezone.now()) - timedelta(days=selectors.retention_days())
    with stores.org_atomic():
        deleted, _ = Envelope.objects.filter(created_at__lt=cutoff).delete()
    return deleted
