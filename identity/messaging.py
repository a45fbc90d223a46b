"""Opaque envelopes through the blind pipe (spec 001): user → agent, agent → user.

The platform stores and forwards an envelope and never parses it: it checks only that it is
base64 and at most `AGENTS_ENVELOPE_MAX_BYTES` (256 KiB, decoded) and reads only the routing
fields (agent, user). A webhook agent's envelope gets a `Delivery` (signed POSTs, retried); a
WebSocket agent's waits, unacknowledged, until its connection takes it. An envelope for a user
lands in their inbox. Org context required.
"""

from __future__ import annotations

import base64
import binascii
import secrets

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents_site.errors import InvalidRequest, NotFound, PayloadTooLarge
from agents_site.vocabulary import ConnectionMode, DeliveryStatus, EnvelopeDirection, InboxItemKind
from identity import live, selectors
from identity.models import Delivery, Envelope, IdentityProfile, InboxItem
from identity.services import lock_key
from tenancy import stores


def max_envelope_bytes() -> int:
    """Return `AGENTS_ENVELOPE_MAX_BYTES` (default 262144 = 256 KiB)."""
    return int(getattr(settings, "AGENTS_ENVELOPE_MAX_BYTES", 256 * 1024))


def clean_envelope(value: object) -> tuple[str, int]:
    """Return `(envelope, decoded size in bytes)`; 400 if it is not base64, 413 over the limit."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("envelope is required (base64 ciphertext)", fields=[{"field": "envelope", "message": "required"}])
    text = value.strip()
    limit = max_envelope_bytes()
    if len(text) > (limit * 4) // 3 + 8:  # refuse before decoding a huge string
        raise PayloadTooLarge(f"the envelope exceeds {limit} bytes", limit=limit)
    try:
        size = len(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest("envelope must be base64", fields=[{"field": "envelope", "message": "not base64"}]) from exc
    if size > limit:
        raise PayloadTooLarge(f"the envelope exceeds {limit} bytes", limit=limit)
    return text, size


def _new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(16)}"


def envelope_to_agent(*, profile: IdentityProfile, user_id: str, envelope: object) -> tuple[Envelope, Delivery | None]:
    """Store `user_id`'s envelope for `profile`'s agent and queue its delivery; return both.

    Webhook mode: a pending `Delivery` is created in the same transaction and its first attempt
    queued on the task engine after commit. WebSocket mode: the agent's connections are woken
    after commit (the envelope waits until acknowledged). 400/413 on a bad envelope.
    """
    body, size = clean_envelope(envelope)
    org = stores.current_org()
    now = timezone.now()
    delivery = None
    with stores.org_atomic():
        row = Envelope.objects.create(
            public_id=_new_id("env"), direction=EnvelopeDirection.TO_AGENT, agent_id=profile.agent_id,
            user_id=user_id, body=body, size_bytes=size, created_at=now,
        )
        if profile.connection_mode == ConnectionMode.WEBHOOK:
            delivery = Delivery.objects.create(
                public_id=_new_id("msg"), agent_id=profile.agent_id, envelope=row, url=profile.webhook_url,
                status=DeliveryStatus.PENDING, next_attempt_at=now, created_at=now, updated_at=now,
            )
            delivery_id = delivery.public_id
            transaction.on_commit(lambda: enqueue_delivery(org, delivery_id), using=stores.current_alias())
        else:
            transaction.on_commit(lambda: live.wake_agent(org, profile.agent_id), using=stores.current_alias())
    return row, delivery


def envelope_to_user(*, agent_id: str, user_id: str, envelope: object) -> tuple[Envelope, InboxItem]:
    """Store agent `agent_id`'s envelope in `user_id`'s inbox; return `(envelope, inbox item)`.

    Only to a user with an active relation with the agent; anyone else is a 404 (the agent
    cannot tell an unknown user from one who never added it). 400/413 on a bad envelope.
    """
    user_id = (user_id or "").strip()
    if not user_id or len(user_id) > 300 or not selectors.has_active_relation(agent_id=agent_id, user_id=user_id):
        raise NotFound("user not found")
    body, size = clean_envelope(envelope)
    org = stores.current_org()
    now = timezone.now()
    with stores.org_atomic():
        lock_key("identity-inbox:" + user_id)  # inbox ids commit in id order per user (the SSE cursor)
        if not selectors.has_active_relation(agent_id=agent_id, user_id=user_id):
            raise NotFound("user not found")
        row = Envelope.objects.create(
            public_id=_new_id("env"), direction=EnvelopeDirection.TO_USER, agent_id=agent_id,
            user_id=user_id, body=body, size_bytes=size, created_at=now,
        )
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
    """Queue one attempt of delivery `delivery_id` of org `org` on django-q2 (never raises)."""
    import logging

    from django_q.tasks import async_task

    try:
        async_task("identity.tasks.deliver", org, delivery_id, task_name=f"identity-deliver-{delivery_id}", group="identity.deliver")
    except Exception:  # the minute tick picks up what could not be queued
        logging.getLogger(__name__).warning("could not queue delivery %s", delivery_id, exc_info=True)


def delivery_replay(*, delivery: Delivery, profile: IdentityProfile) -> Delivery:
    """Queue a new delivery of `delivery`'s envelope to the agent's current webhook_url (202).

    Only a finished delivery (succeeded, dead, cancelled) of a webhook agent; 409 otherwise.
    """
    from agents_site.errors import Conflict

    if delivery.status in DeliveryStatus.OPEN:
        raise Conflict("the delivery is still being attempted")
    if profile.connection_mode != ConnectionMode.WEBHOOK or not profile.webhook_url:
        raise Conflict("the agent is not in webhook mode")
    org = stores.current_org()
    now = timezone.now()
    with stores.org_atomic():
        replay = Delivery.objects.create(
            public_id=_new_id("msg"), agent_id=delivery.agent_id, envelope_id=delivery.envelope_id, url=profile.webhook_url,
            status=DeliveryStatus.PENDING, next_attempt_at=now, created_at=now, updated_at=now,
        )
        replay_id = replay.public_id
        transaction.on_commit(lambda: enqueue_delivery(org, replay_id), using=stores.current_alias())
    return replay


def envelopes_purge(*, now=None) -> int:
    """Delete envelopes (with their deliveries and inbox items) older than the retention; return how many."""
    from datetime import timedelta

    cutoff = (now or timezone.now()) - timedelta(days=selectors.retention_days())
    with stores.org_atomic():
        deleted, _ = Envelope.objects.filter(created_at__lt=cutoff).delete()
    return deleted
