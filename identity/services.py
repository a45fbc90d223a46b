"""Writes of identity agents (spec 001): create, edit, rotate, keys, relations, cascade delete.

Every function runs inside an org context (the creating org's store). Field shapes are checked
by the serializers (`identity.serializers`); the rules that need the store or the settings —
reserved prefixes, webhook destinations, uniqueness, the quota, the rotation limit — are here.
Nothing is written when any rule fails.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents import services as agent_services
from agents.models import Agent
from agents_site.errors import InvalidRequest, NotFound, PayloadTooLarge
from agents_site.wire import rfc3339
from agents_site.vocabulary import (
    AgentHosting,
    ConnectionMode,
    DeliveryStatus,
    InboxItemKind,
    RelationStatus,
    SystemMessageCode,
    SystemMessageType,
)
from identity import live, selectors
from identity.destinations import clean_url
from identity.delivery import alert_delivery
from identity.errors import AgentLimitExceeded, RotationLimit
from identity.keys import validate_ed25519, validate_webhook_secret, validate_x25519
from identity.manifest_format import ManifestInvalid, manifest_check
from identity.models import (AgentCredential, AgentKeySet, AgentManifest, ClientAnomaly, Delivery, IdentityLock, IdentityProfile, InboxItem, KeyBackup,
                             Relation, TokenRotation, UserKeySet)
from identity.secretbox import encrypt_secret
from identity.tokens import credential_is_valid, mint_token
from sessions.services import refuse_secrets
from tenancy import stores

ROTATION_WINDOW = timedelta(hours=24)
# custom_id words that would shadow a fixed route of /v1/agents/{ref} when used as the agent's name.
ROUTE_WORDS = frozenset({"runs", "sessions", "builds", "targets", "activity", "metrics", "billing", "openapi", "docs", "chat", "coding", "openai"})
UNSET = object()


def reserved_prefixes() -> list[str]:
    """Return `AGENTS_IDENTITY_RESERVED_PREFIXES` (default hashee, system, admin, official)."""
    return list(getattr(settings, "AGENTS_IDENTITY_RESERVED_PREFIXES", ["hashee", "system", "admin", "official"]))


def check_custom_id(custom_id: str) -> str:
    """Return `custom_id` if no reserved prefix or route word applies; raise `InvalidRequest`."""
    for prefix in reserved_prefixes():
        if prefix and custom_id.startswith(prefix):
            raise InvalidRequest(f"custom_id must not start with the reserved prefix '{prefix}'", fields=[{"field": "custom_id", "message": "reserved prefix"}])
    if custom_id in ROUTE_WORDS:
        raise InvalidRequest(f"custom_id '{custom_id}' is reserved", fields=[{"field": "custom_id", "message": "reserved"}])
    return custom_id


def lock_key(key: str) -> None:
    """Serialise writers of `key` until the current org transaction ends.

    Takes a row lock (`SELECT … FOR UPDATE`) on the key's `IdentityLock` row, created on first
    use. PostgreSQL stores block a second writer there; SQLite stores take the write lock at
    BEGIN (IMMEDIATE), which already serialises every writer. Must run inside `org_atomic`.
    """
    IdentityLock.objects.get_or_create(key=key[:200])
    IdentityLock.objects.select_for_update().filter(key=key[:200]).first()


@dataclass
class IdentityInput:
    """Validated identity fields (`UNSET` = omitted on a PATCH)."""

    display_name: object = UNSET
    custom_id: object = UNSET
    bio: object = UNSET
    avatar_url: object = UNSET
    category: object = UNSET
    connection_mode: object = UNSET
    webhook_url: object = UNSET
    health_check_url: object = UNSET


def _given(value: object) -> bool:
    return value is not UNSET


def _check_mode(mode: str, webhook_url: str) -> None:
    if mode == ConnectionMode.WEBHOOK and not webhook_url:
        raise InvalidRequest("webhook_url is required when connection_mode is webhook", fields=[{"field": "webhook_url", "message": "required"}])


def _issue_credential(*, org_slug: str, agent_id: str, now) -> str:
    token, token_id, token_hash = mint_token(org_slug)
    AgentCredential.objects.create(token_id=token_id, agent_id=agent_id, token_hash=token_hash, created_at=now)
    return token


def identity_agent_create(*, creator_id: str, data: IdentityInput) -> tuple[IdentityProfile, str]:
    """Create an identity agent for `creator_id` in the current org; return `(profile, token)`.

    The token (`agt_…`) is returned here once and stored only as bcrypt. The quota
    (`AGENTS_IDENTITY_QUOTA`, 50 per creating user) is counted inside the insert's org-store
    transaction. Raises `InvalidRequest` (400), `AgentExists` (409, custom_id taken) or
    `AgentLimitExceeded` (409 `agent_limit_exceeded`, AGT_008).
    """
    mode = str(data.connection_mode)
    webhook_url = clean_url(data.webhook_url if _given(data.webhook_url) else "", "webhook_url")
    health_url = clean_url(data.health_check_url if _given(data.health_check_url) else "", "health_check_url")
    avatar_url = clean_url(data.avatar_url if _given(data.avatar_url) else "", "avatar_url", https_only=True)
    _check_mode(mode, webhook_url)
    custom_id = data.custom_id if _given(data.custom_id) and data.custom_id else None
    name = check_custom_id(str(custom_id)) if custom_id else "ext_" + secrets.token_hex(5)
    quota = int(getattr(settings, "AGENTS_IDENTITY_QUOTA", 50))
    org_slug = stores.current_org()
    now = timezone.now()
    with stores.org_atomic():
        lock_key("identity-quota:" + creator_id)
        if selectors.identity_count(creator_id=creator_id) >= quota:
            raise AgentLimitExceeded(quota)
        agent = agent_services.agent_create_external(name=name, description=str(data.bio) if _given(data.bio) else "")
        profile = IdentityProfile.objects.create(
            agent=agent,
            display_name=str(data.display_name),
            bio=str(data.bio) if _given(data.bio) else "",
            avatar_url=avatar_url,
            category=str(data.category) if _given(data.category) and data.category else "",
            connection_mode=mode,
            webhook_url=webhook_url,
            health_check_url=health_url,
            creator_id=creator_id,
            created_at=now,
            updated_at=now,
        )
        token = _issue_credential(org_slug=org_slug, agent_id=agent.id, now=now)
    return profile, token


def identity_agent_update(*, profile: IdentityProfile, data: IdentityInput) -> IdentityProfile:
    """Change identity agent `profile` in place; omitted fields keep their value.

    `custom_id` is immutable (400 when it differs). Switching to webhook needs a webhook_url.
    """
    if _given(data.custom_id) and data.custom_id not in (None, "", profile.agent.name):
        raise InvalidRequest("custom_id is immutable", fields=[{"field": "custom_id", "message": "immutable"}])
    changes: dict = {}
    if _given(data.display_name):
        changes["display_name"] = str(data.display_name)
    if _given(data.bio):
        changes["bio"] = str(data.bio or "")
    if _given(data.avatar_url):
        changes["avatar_url"] = clean_url(data.avatar_url, "avatar_url", https_only=True)
    if _given(data.category):
        changes["category"] = str(data.category or "")
    if _given(data.connection_mode):
        changes["connection_mode"] = str(data.connection_mode)
    if _given(data.webhook_url):
        changes["webhook_url"] = clean_url(data.webhook_url, "webhook_url")
    if _given(data.health_check_url):
        changes["health_check_url"] = clean_url(data.health_check_url, "health_check_url")
    _check_mode(changes.get("connection_mode", profile.connection_mode), changes.get("webhook_url", profile.webhook_url))
    now = timezone.now()
    with stores.org_atomic():
        fresh = IdentityProfile.objects.select_related("agent").get(pk=profile.pk)
        for field, value in changes.items():
            setattr(fresh, field, value)
        if "health_check_url" in changes and changes["health_check_url"] != profile.health_check_url:
            fresh.health, fresh.health_detail, fresh.health_checked_at = "unknown", "", None
        fresh.updated_at = now
        fresh.save()
        if "bio" in changes:
            Agent.objects.filter(pk=fresh.agent_id).update(description=fresh.bio, updated_at=now)
    return fresh


def identity_agent_delete(*, profile: IdentityProfile) -> None:
    """Delete identity agent `profile` through the one agent delete path (cascade included)."""
    agent_services.agent_delete(ref=profile.agent_id)


def identity_cascade_delete(agent: Agent) -> None:
    """The agent delete handler (registered in `IdentityConfig.ready`): spec 001 cascade.

    Runs inside `agents.services.agent_delete`'s org transaction for an external agent: every
    active relation becomes `terminated_by_deletion`, each affected user gets a
    `security_alert` / `agent.deleted_by_creator` inbox message, every token and key set is
    revoked (webhook secrets wiped), open deliveries are cancelled. Envelopes are kept. After
    commit, live WebSocket connections are closed and inbox streams woken.
    """
    if agent.hosting != AgentHosting.EXTERNAL:
        return
    org = stores.current_org()
    agent_id = agent.id  # the row's pk is cleared once the delete runs, before the commit hooks
    now = timezone.now()
    profile = IdentityProfile.objects.filter(agent_id=agent_id).first()
    display_name = profile.display_name if profile else agent.name
    relations = list(selectors.active_relations(agent_id=agent.id))
    users = sorted({r.user_id for r in relations})
    for user in users:  # inbox ids commit in order per user (sorted: no deadlock)
        lock_key("identity-inbox:" + user)
    Relation.objects.filter(pk__in=[r.pk for r in relations]).update(status=RelationStatus.TERMINATED_BY_DELETION, ended_at=now)
    InboxItem.objects.bulk_create(
        [
            InboxItem(
                user_id=user,
                kind=InboxItemKind.SYSTEM,
                agent_id=agent.id,
                system_type=SystemMessageType.SECURITY_ALERT,
                system_code=SystemMessageCode.AGENT_DELETED_BY_CREATOR,
                data={"agent_id": agent.id, "custom_id": agent.name, "display_name": display_name},
                created_at=now,
            )
            for user in users
        ]
    )
    AgentCredential.objects.filter(agent_id=agent.id, revoked_at__isnull=True).update(revoked_at=now)
    AgentKeySet.objects.filter(agent_id=agent.id).update(revoked_at=now, webhook_secret_encrypted="")
    Delivery.objects.filter(agent_id=agent.id, status__in=DeliveryStatus.OPEN).update(
        status=DeliveryStatus.CANCELLED, last_error="the agent was deleted", next_attempt_at=None, updated_at=now
    )

    def after_commit() -> None:
        live.revoke_connections(org, agent_id, None)
        for user in users:
            live.wake_inbox(org, user)

    transaction.on_commit(after_commit, using=stores.current_alias())


def token_regenerate(*, profile: IdentityProfile, emergency: bool, actor: str) -> str:
    """Mint a new token for `profile`'s agent and return it (shown once).

    Normal: the old tokens and key sets stay valid `AGENTS_IDENTITY_GRACE_SECONDS` (7 days).
    Emergency: revoked at once, and live WebSocket connections using them are closed.
    At most `AGENTS_IDENTITY_ROTATIONS_PER_DAY` (5) per agent per 24 h, counted from the
    durable rotation log → `RotationLimit` (429).
    """
    grace = timedelta(seconds=int(getattr(settings, "AGENTS_IDENTITY_GRACE_SECONDS", 7 * 24 * 3600)))
    limit = int(getattr(settings, "AGENTS_IDENTITY_ROTATIONS_PER_DAY", 5))
    agent_id = profile.agent_id
    org = stores.current_org()
    now = timezone.now()
    with stores.org_atomic():
        lock_key("identity-rotate:" + agent_id)
        recent = list(TokenRotation.objects.filter(agent_id=agent_id, created_at__gt=now - ROTATION_WINDOW).order_by("created_at").values_list("created_at", flat=True))
        if len(recent) >= limit:
            retry_after = max(1, int((recent[0] + ROTATION_WINDOW - now).total_seconds()) + 1)
            raise RotationLimit(f"the token was rotated {limit} times in the last 24 hours; try again later", limit=limit, retry_after=retry_after)
        TokenRotation.objects.create(agent_id=agent_id, emergency=emergency, actor=actor, created_at=now)
        live_credentials = [c for c in AgentCredential.objects.filter(agent_id=agent_id, revoked_at__isnull=True) if credential_is_valid(c, now=now)]
        revoked_ids = [c.pk for c in live_credentials]
        old_secret = (AgentKeySet.objects.filter(agent_id=agent_id, revoked_at__isnull=True).exclude(webhook_secret_encrypted="")
                      .order_by("-id").values_list("webhook_secret_encrypted", flat=True).first() or "")
        if emergency:
            AgentCredential.objects.filter(pk__in=revoked_ids).update(revoked_at=now)
            AgentKeySet.objects.filter(agent_id=agent_id, revoked_at__isnull=True).update(revoked_at=now, webhook_secret_encrypted="")
        else:
            AgentCredential.objects.filter(pk__in=revoked_ids, expires_at__isnull=True).update(expires_at=now + grace)
            AgentKeySet.objects.filter(agent_id=agent_id, revoked_at__isnull=True, expires_at__isnull=True).update(expires_at=now + grace)
        token = _issue_credential(org_slug=org, agent_id=agent_id, now=now)
        users = _alert_users_keys_revoked(agent_id=agent_id, now=now) if emergency else []
        if emergency:
            # A webhook-mode agent hears it too, signed with the secret it had (it has no other).
            alert_delivery(profile=profile, code=SystemMessageCode.AGENT_TOKEN_REVOKED, data={"emergency": True}, secret_encrypted=old_secret)

            def after_commit() -> None:
                live.revoke_connections(org, agent_id, revoked_ids)
                for user in users:
                    live.wake_inbox(org, user)

            transaction.on_commit(after_commit, using=stores.current_alias())
        else:
            until = rfc3339(now + grace)
            alert_delivery(profile=profile, code=SystemMessageCode.AGENT_TOKEN_ROTATED, data={"previous_valid_until": until})
            transaction.on_commit(lambda: live.alert_agent(org, agent_id, SystemMessageCode.AGENT_TOKEN_ROTATED, {"previous_valid_until": until}),
                                  using=stores.current_alias())
    return token


def _alert_users_keys_revoked(*, agent_id: str, now) -> list[str]:
    """Put a `security_alert` / `agent.keys_revoked` in the inbox of every user with an active
    relation with `agent_id` (inside the rotation's transaction); return those users.

    Their conversation views say why replies signed with the old key are refused from now on.
    """
    profile = IdentityProfile.objects.select_related("agent").filter(agent_id=agent_id).first()
    users = sorted(set(selectors.active_relations(agent_id=agent_id).values_list("user_id", flat=True)))
    for user in users:  # inbox ids commit in order per user (sorted: no deadlock)
        lock_key("identity-inbox:" + user)
    data = {"agent_id": agent_id, "custom_id": profile.agent.name if profile else "", "display_name": profile.display_name if profile else "",
            "revoked_at": rfc3339(now)}
    InboxItem.objects.bulk_create([
        InboxItem(user_id=user, kind=InboxItemKind.SYSTEM, agent_id=agent_id, system_type=SystemMessageType.SECURITY_ALERT,
                  system_code=SystemMessageCode.AGENT_KEYS_REVOKED, data=data, created_at=now)
        for user in users
    ])
    return users


def keys_register(*, agent_id: str, public_key: object, signing_public_key: object, webhook_secret: object = None) -> AgentKeySet:
    """Register the agent's X25519 and Ed25519 public keys (and webhook secret); return the set.

    Each key is validated as a real 32-byte public key (400 otherwise). A webhook-mode agent must
    send `webhook_secret` (`whsec_<base64>`, ≥ 24 bytes), stored Fernet-encrypted; a websocket
    agent must not. The previous current set is superseded at once; sets already in a rotation's
    grace keep their expiry.
    """
    profile = IdentityProfile.objects.filter(agent_id=agent_id).first()
    if profile is None:
        raise NotFound("agent not found")
    x25519 = validate_x25519(public_key)
    ed25519 = validate_ed25519(signing_public_key)
    secret = None
    if profile.connection_mode == ConnectionMode.WEBHOOK:
        if webhook_secret in (None, ""):
            raise InvalidRequest("webhook_secret is required for a webhook agent", fields=[{"field": "webhook_secret", "message": "required"}])
        secret = validate_webhook_secret(webhook_secret)
    elif webhook_secret not in (None, ""):
        raise InvalidRequest("webhook_secret is only for webhook agents", fields=[{"field": "webhook_secret", "message": "not allowed"}])
    now = timezone.now()
    with stores.org_atomic():
        AgentKeySet.objects.filter(agent_id=agent_id, revoked_at__isnull=True, expires_at__isnull=True).update(revoked_at=now, webhook_secret_encrypted="")
        return AgentKeySet.objects.create(
            agent_id=agent_id,
            public_key=x25519,
            signing_public_key=ed25519,
            webhook_secret_encrypted=encrypt_secret(secret) if secret else "",
            created_at=now,
        )


def user_keys_put(*, user_id: str, public_key: object, signing_public_key: object) -> tuple[UserKeySet, bool]:
    """Register `user_id`'s X25519 and Ed25519 public keys in the org; return `(key set, created)`.

    Each key is validated as a real 32-byte public key (400 otherwise). The same pair again is
    a no-op (`created` False). A new pair becomes current and the previous current set enters
    its grace period (`AGENTS_IDENTITY_GRACE_SECONDS`): replies already sealed to it still open.
    """
    x25519 = validate_x25519(public_key)
    ed25519 = validate_ed25519(signing_public_key)
    grace = timedelta(seconds=int(getattr(settings, "AGENTS_IDENTITY_GRACE_SECONDS", 7 * 24 * 3600)))
    now = timezone.now()
    with stores.org_atomic():
        lock_key("identity-user-keys:" + user_id)
        current = UserKeySet.objects.filter(user_id=user_id, revoked_at__isnull=True, expires_at__isnull=True).order_by("-created_at", "-id")
        first = current.first()
        if first is not None and first.public_key == x25519 and first.signing_public_key == ed25519:
            return first, False
        current.update(expires_at=now + grace)
        return UserKeySet.objects.create(user_id=user_id, public_key=x25519, signing_public_key=ed25519, created_at=now), True


def relation_add(*, profile: IdentityProfile, user_id: str) -> tuple[Relation, bool]:
    """Add identity agent `profile` for `user_id`; return `(relation, created)` (idempotent)."""
    with stores.org_atomic():
        existing = selectors.active_relations(agent_id=profile.agent_id).filter(user_id=user_id).first()
        if existing is not None:
            return existing, False
        return Relation.objects.create(agent_id=profile.agent_id, user_id=user_id, created_at=timezone.now()), True


def relation_remove(*, profile: IdentityProfile, user_id: str) -> None:
    """End `user_id`'s active relation with `profile`'s agent; 404 when there is none."""
    with stores.org_atomic():
        updated = selectors.active_relations(agent_id=profile.agent_id).filter(user_id=user_id).update(
            status=RelationStatus.REMOVED, ended_at=timezone.now()
        )
    if not updated:
        raise NotFound("relation not found")


ANOMALY_DETAIL_MAX_BYTES = 2048


def anomaly_record(*, user_id: str, kind: str, artifact_subtype: str = "", endpoint: str = "", conversation_id: str = "",
                   detail: dict | None = None) -> ClientAnomaly:
    """Store one refusal a client's client_action executor reported (spec 001 security model); return it.

    `kind` is an `AnomalyKind` (checked by the serializer); `detail` a flat object of names
    (at most 2 KiB as JSON, 400 otherwise). A credential anywhere in it is refused (422
    `secret_in_transcript`): an anomaly report never stores a secret.
    """
    detail = detail or {}
    if len(json.dumps(detail)) > ANOMALY_DETAIL_MAX_BYTES:
        raise InvalidRequest(f"detail must be at most {ANOMALY_DETAIL_MAX_BYTES} bytes of JSON", fields=[{"field": "detail", "message": "too large"}])
    refuse_secrets({"endpoint": endpoint, "artifact_subtype": artifact_subtype, "conversation_id": conversation_id, "detail": detail})
    with stores.org_atomic():
        return ClientAnomaly.objects.create(user_id=user_id, kind=kind, artifact_subtype=artifact_subtype, endpoint=endpoint,
                                            conversation_id=conversation_id, detail=detail, created_at=timezone.now())


def backup_put(*, user_id: str, blob: str) -> KeyBackup:
    """Store `blob` as `user_id`'s one `encrypted_backup_blob_v2` (replacing any earlier one); return it.

    `blob` is standard base64 (400 otherwise) of at most `AGENTS_IDENTITY_BACKUP_MAX_BYTES`
    characters (413 `payload_too_large`, `limit`). Opaque: the platform cannot open it.
    """
    limit = int(settings.AGENTS_IDENTITY_BACKUP_MAX_BYTES)
    if len(blob) > limit:
        raise PayloadTooLarge(f"the backup exceeds {limit} bytes", limit=limit)
    try:
        base64.b64decode(blob, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("encrypted_backup_blob_v2 must be base64", fields=[{"field": "encrypted_backup_blob_v2", "message": "not base64"}]) from None
    now = timezone.now()
    with stores.org_atomic():
        backup, _ = KeyBackup.objects.update_or_create(
            user_id=user_id, defaults={"blob": blob, "size_bytes": len(blob), "updated_at": now}, create_defaults={
                "blob": blob, "size_bytes": len(blob), "created_at": now, "updated_at": now})
    return backup


def backup_delete(*, user_id: str) -> None:
    """Delete `user_id`'s backup; 404 when there is none."""
    with stores.org_atomic():
        deleted, _ = KeyBackup.objects.filter(user_id=user_id).delete()
    if not deleted:
        raise NotFound("no backup")


def manifest_register(*, profile: IdentityProfile, manifest: object) -> tuple[AgentManifest, bool]:
    """Register identity agent `profile`'s capability manifest (docs/manifests.md); return `(row, created)`.

    The manifest must pass `identity.manifest_format.manifest_check` with the agent's current and
    in-grace signing keys (400 `manifest_invalid` naming `field` and `reason`; 413 over the
    size), list the agent's own `connection_mode` among its transports (400, `field` the
    transports), and carry no credential (422 `secret_in_transcript`). It replaces the agent's
    earlier manifest (`created` False then). Nothing is stored when any check refuses.
    """
    card, kid = manifest_check(manifest, signing_keys=selectors.signing_keys(agent_id=profile.agent_id))
    extension = next(e for e in card.capabilities.extensions if e.uri.startswith("urn:agents:manifest:"))
    transports = list(extension.params["transports"])
    if profile.connection_mode not in transports:
        index = list(card.capabilities.extensions).index(extension)
        raise ManifestInvalid("bad_extension", f"capabilities.extensions[{index}].params.transports",
                              f"the agent connects by {profile.connection_mode}; list it")
    refuse_secrets({key: value for key, value in manifest.items() if key != "signatures"})
    now = timezone.now()
    with stores.org_atomic():
        row, created = AgentManifest.objects.update_or_create(agent_id=profile.agent_id, defaults={
            "card": manifest, "signing_kid": kid, "registered_at": now})
    return row, created
