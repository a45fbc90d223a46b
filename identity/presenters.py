"""Wire views of the identity API (spec 001: snake_case field names)."""

from __future__ import annotations

from agents_site.vocabulary import WebhookEventType
from agents_site.wire import rfc3339
from identity.keys import key_id, keyset_status
from identity.manifest_format import EXTENSION_PREFIX as MANIFEST_EXTENSION_PREFIX
from identity.models import AgentKeySet, AgentManifest, Delivery, Envelope, IdentityProfile, InboxItem, Relation, UserKeySet


def public_keys_view(keyset: AgentKeySet | UserKeySet) -> dict:
    """Return the public half of a key set (an agent's or a user's): keys, key ids, status, times.

    `{"kid", "public_key", "signing_kid", "signing_public_key", "status", "registered_at",
    "expires_at", "revoked_at"}` — `status` a `KeyStatus` (seal only to `current`; open and
    verify with `current` and `grace`; refuse what a `revoked` key signed).
    """
    return {
        "kid": key_id(keyset.public_key),
        "public_key": keyset.public_key,
        "signing_kid": key_id(keyset.signing_public_key),
        "signing_public_key": keyset.signing_public_key,
        "status": keyset_status(keyset),
        "registered_at": rfc3339(keyset.created_at),
        "expires_at": rfc3339(keyset.expires_at) or None,
        "revoked_at": rfc3339(keyset.revoked_at) or None,
    }


def keyset_view(keyset: AgentKeySet) -> dict:
    """Return a registered agent key set: the public keys and ids, whether a webhook secret is set, validity."""
    return {**public_keys_view(keyset), "webhook_secret_set": bool(keyset.webhook_secret_encrypted)}


def identity_view(profile: IdentityProfile, *, keysets: list[AgentKeySet] | None = None) -> dict:
    """Return the wire view of an identity agent (never a token or secret)."""
    agent = profile.agent
    return {
        "agent_id": agent.id,
        "custom_id": agent.name,
        "display_name": profile.display_name,
        "bio": profile.bio,
        "avatar_url": profile.avatar_url or None,
        "category": profile.category or None,
        "connection_mode": profile.connection_mode,
        "webhook_url": profile.webhook_url or None,
        "health_check_url": profile.health_check_url or None,
        "health": {"status": profile.health, "detail": profile.health_detail or None, "checked_at": rfc3339(profile.health_checked_at) or None},
        "hosting": agent.hosting,
        "creator_id": profile.creator_id,
        "public_keys": [keyset_view(k) for k in (keysets or [])],
        "created_at": rfc3339(profile.created_at),
        "updated_at": rfc3339(profile.updated_at),
    }


def public_identity_view(profile: IdentityProfile) -> dict:
    """Return what another agent may see of an identity agent (user-context route)."""
    return {
        "agent_id": profile.agent_id,
        "custom_id": profile.agent.name,
        "display_name": profile.display_name,
        "avatar_url": profile.avatar_url or None,
        "category": profile.category or None,
    }


def relation_view(relation: Relation) -> dict:
    """Return the wire view of an H2A relation."""
    return {
        "agent_id": relation.agent_id,
        "user_id": relation.user_id,
        "status": relation.status,
        "created_at": rfc3339(relation.created_at),
        "ended_at": rfc3339(relation.ended_at) or None,
    }


def envelope_view(envelope: Envelope) -> dict:
    """Return the wire view of an envelope (the sealed body included; `message_id` from its header)."""
    return {
        "envelope_id": envelope.public_id,
        "message_id": envelope.message_id,
        "direction": envelope.direction,
        "agent_id": envelope.agent_id,
        "user_id": envelope.user_id,
        "envelope": envelope.body,
        "size_bytes": envelope.size_bytes,
        "created_at": rfc3339(envelope.created_at),
    }


def inbox_item_view(item: InboxItem) -> dict:
    """Return one inbox item: `{id, kind, agent_id, created_at}` plus `envelope` or `system`."""
    view = {"id": str(item.id), "kind": item.kind, "agent_id": item.agent_id, "created_at": rfc3339(item.created_at)}
    if item.envelope_id is not None:
        view["envelope"] = envelope_view(item.envelope)
    if item.system_code:
        view["system"] = {"type": item.system_type, "code": item.system_code, "data": item.data}
    return view


def delivery_view(delivery: Delivery, *, with_attempts: bool = True) -> dict:
    """Return the wire view of a webhook delivery and its attempt log."""
    view = {
        "delivery_id": delivery.public_id,
        "type": delivery.event_type or str(WebhookEventType.ENVELOPE),
        "envelope_id": delivery.envelope.public_id if delivery.envelope_id else None,
        "agent_id": delivery.agent_id,
        "url": delivery.url,
        "status": delivery.status,
        "attempts": delivery.attempts,
        "last_status_code": delivery.last_status_code,
        "last_error": delivery.last_error or None,
        "next_attempt_at": rfc3339(delivery.next_attempt_at) or None,
        "created_at": rfc3339(delivery.created_at),
        "delivered_at": rfc3339(delivery.delivered_at) or None,
    }
    if with_attempts:
        view["attempt_log"] = [
            {"number": a.number, "status_code": a.status_code, "error": a.error or None,
             "response_body": a.response_body or None, "duration_ms": a.duration_ms, "at": rfc3339(a.created_at)}
            for a in delivery.attempt_log.all()
        ]
    return view


def anomaly_view(anomaly) -> dict:
    """Return the wire view of a client anomaly (names only; it never held a value)."""
    return {
        "id": anomaly.pk,
        "kind": anomaly.kind,
        "artifact_subtype": anomaly.artifact_subtype,
        "endpoint": anomaly.endpoint,
        "conversation_id": anomaly.conversation_id,
        "detail": anomaly.detail,
        "created_at": rfc3339(anomaly.created_at),
        "user_id": anomaly.user_id,
    }


def backup_view(backup, *, with_blob: bool) -> dict:
    """Return a key backup's size and times, and with `with_blob` the `encrypted_backup_blob_v2` itself."""
    view = {"size_bytes": backup.size_bytes, "created_at": rfc3339(backup.created_at), "updated_at": rfc3339(backup.updated_at)}
    if with_blob:
        view["encrypted_backup_blob_v2"] = backup.blob
    return view


def manifest_view(manifest: AgentManifest, *, key_status: str, verification: dict) -> dict:
    """Return a registered capability manifest: `{agent_id, manifest, signing_kid, signing_key_status, verification, registered_at}`.

    `manifest` is the signed card exactly as the agent registered it (verify it yourself with
    the agent's keys: docs/manifests.md); `signing_key_status` the `KeyStatus` of the key that
    signed it now (a `revoked` key's manifest is no longer to be trusted); `verification` the
    platform's check of it now (`identity.selectors.manifest_verification`):
    `{"verifies": bool, "kid": str | None, "reason": str | None, "field": str | None}`.
    """
    return {"agent_id": manifest.agent_id, "manifest": manifest.card, "signing_kid": manifest.signing_kid,
            "signing_key_status": key_status, "verification": verification, "registered_at": rfc3339(manifest.registered_at)}


def manifest_summary(card: dict) -> dict:
    """Return what a person reads of a stored manifest `card` (an A2A card in proto3 JSON, docs/manifests.md).

    `{"name", "description", "version", "skills": [{"id", "name", "description", "tags"}],
    "interfaces": [{"url", "binding", "version"}], "extension": <uri> | None,
    "envelope_version": str | None, "transports": [str]}` — read defensively: a card is stored as
    registered, and a missing field reads empty rather than failing the page.
    """
    card = card if isinstance(card, dict) else {}
    extensions = (card.get("capabilities") or {}).get("extensions") or []
    ours = next((e for e in extensions if isinstance(e, dict) and str(e.get("uri", "")).startswith(MANIFEST_EXTENSION_PREFIX)), {})
    params = ours.get("params") if isinstance(ours.get("params"), dict) else {}
    transports = params.get("transports") if isinstance(params.get("transports"), list) else []
    return {
        "name": card.get("name", ""), "description": card.get("description", ""), "version": card.get("version", ""),
        "skills": [{"id": s.get("id", ""), "name": s.get("name", ""), "description": s.get("description", ""),
                    "tags": [str(t) for t in s.get("tags") or []]} for s in card.get("skills") or [] if isinstance(s, dict)],
        "interfaces": [{"url": i.get("url", ""), "binding": i.get("protocolBinding", ""), "version": i.get("protocolVersion", "")}
                       for i in card.get("supportedInterfaces") or [] if isinstance(i, dict)],
        "extension": ours.get("uri"), "envelope_version": params.get("envelopeVersion"), "transports": [str(t) for t in transports],
    }
