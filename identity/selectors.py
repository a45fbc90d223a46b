"""Reads of identity agents, relations, envelopes, deliveries and inboxes. Org context required."""

from __future__ import annotations

import base64
import re

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from django.conf import settings
from django.db.models import Prefetch

from agents.models import Agent
from agents_site.errors import InvalidRequest, NotFound, PayloadTooLarge
from agents_site.pagination import keyset_page
from agents_site.vocabulary import (AgentHosting, DeliveryStatus, EnvelopeDirection, InboxItemKind, KeyStatus, RelationStatus)
from identity.keys import key_id, keyset_status
from identity.manifest_format import ManifestInvalid, manifest_check
from identity.models import (AgentKeySet, AgentManifest, ClientAnomaly, Delivery, DeliveryAttempt, Envelope, IdentityProfile, InboxItem, KeyBackup, Relation,
                             UserKeySet)
from identity.tokens import credential_is_valid

MAX_REF = 128
PAGE_DEFAULT = 50
PAGE_MAX = 200


def page_limit(limit: object) -> int:
    """Return `limit` if it is 1..200; 50 when absent or out of range; 400 when not an integer."""
    if limit is None or limit == "":
        return PAGE_DEFAULT
    raw = str(limit).strip()
    if not re.fullmatch(r"[-+]?[0-9]{1,4000}", raw):  # any integer (Python parses up to 4300 digits)
        raise InvalidRequest("limit must be an integer")
    value = int(raw)
    return value if 1 <= value <= PAGE_MAX else PAGE_DEFAULT


def _cursor_page(qs, *, cursor: object, limit: object, tag: str) -> tuple[list, str | None]:
    """Return one page of `qs` by descending id after `cursor` and the next cursor (None at the end).

    The cursor is the one signed-cursor format of both APIs (`agents_site.pagination`): bound by
    HMAC to list `tag`, the org's store and the list's filters (the agent, the user, the status),
    so a cursor this list did not hand out — another org's, another agent's or user's, another
    list's, an edited one — is 400 `invalid_request` (issue 29, signed cursors). A blank cursor
    reads the first page.
    """
    size = page_limit(limit)
    raw = cursor if isinstance(cursor, str) and cursor.strip() else None
    page = keyset_page(qs, order=("-id",), limit=size, cursor=raw, tag=tag)
    return page.items, page.next_cursor


def identity_get(*, ref: str) -> IdentityProfile:
    """Return the identity profile of the org's external agent `ref` (id or custom_id); 404 otherwise."""
    ref = (ref or "").strip()
    if not ref or len(ref) > MAX_REF:
        raise NotFound("agent not found")
    agent = Agent.objects.filter(pk=ref, hosting=AgentHosting.EXTERNAL).first() or Agent.objects.filter(
        name=ref, hosting=AgentHosting.EXTERNAL
    ).first()
    profile = IdentityProfile.objects.select_related("agent").filter(agent=agent).first() if agent else None
    if profile is None:
        raise NotFound("agent not found")
    return profile


def identity_get_owned(*, ref: str, creator_id: str) -> IdentityProfile:
    """Return identity agent `ref` if `creator_id` created it; 404 exactly like a missing one."""
    profile = identity_get(ref=ref)
    if profile.creator_id != creator_id:
        raise NotFound("agent not found")
    return profile


def identity_find_owned(*, ref: str, creator_id: str) -> list[IdentityProfile]:
    """Return the identity agents of `creator_id` that `ref` names, for a person typing a name.

    `ref` is an agent id or a custom id (each names at most one agent: that one), else a
    display name, compared without case (`casefold`) and surrounding spaces — several agents
    may share one, and all of them are returned, oldest first, so the caller can ask which.
    [] when none matches (another user's agent never does). Two queries at most.
    Example: two agents named "Echo" → both; "echo_bot" (a custom id) → that one.
    """
    ref = (ref or "").strip()
    if not ref or len(ref) > MAX_REF:
        return []
    mine = IdentityProfile.objects.select_related("agent").filter(creator_id=creator_id, agent__hosting=AgentHosting.EXTERNAL)
    exact = list(mine.filter(agent_id=ref)) or list(mine.filter(agent__name=ref))
    if exact:
        return exact[:1]
    wanted = ref.casefold()
    return [p for p in mine.order_by("created_at") if p.display_name.strip().casefold() == wanted]


def identity_get_related(*, ref: str, user_id: str) -> IdentityProfile:
    """Return identity agent `ref` if `user_id` created it or has an active relation with it; 404 otherwise."""
    profile = identity_get(ref=ref)
    if profile.creator_id != user_id and not has_active_relation(agent_id=profile.agent_id, user_id=user_id):
        raise NotFound("agent not found")
    return profile


def identity_list(*, creator_id: str) -> list[IdentityProfile]:
    """Return the identity agents `creator_id` created, newest first (one query)."""
    return list(IdentityProfile.objects.select_related("agent").filter(creator_id=creator_id).order_by("-created_at"))


def identity_profiles(*, agent_ids: list[str]) -> list[IdentityProfile]:
    """Return the identity profiles of `agent_ids` (those that still exist), by display name (one query)."""
    return list(IdentityProfile.objects.select_related("agent").filter(agent_id__in=agent_ids).order_by("display_name"))


def agent_alerts(*, user_id: str, agent_id: str, limit: int = 20) -> list[InboxItem]:
    """Return `user_id`'s newest system messages about `agent_id` (security alerts), oldest first."""
    rows = InboxItem.objects.filter(user_id=user_id, agent_id=agent_id, kind=InboxItemKind.SYSTEM).order_by("-id")[:limit]
    return list(reversed(rows))


def identity_count(*, creator_id: str) -> int:
    """Return how many identity agents `creator_id` has in the org (the quota counter)."""
    return IdentityProfile.objects.filter(creator_id=creator_id).count()


def valid_keysets(*, agent_ids: list[str]) -> dict[str, list[AgentKeySet]]:
    """Return each agent's currently valid key sets, newest first (one query)."""
    result: dict[str, list[AgentKeySet]] = {a: [] for a in agent_ids}
    for keyset in AgentKeySet.objects.filter(agent_id__in=agent_ids, revoked_at__isnull=True).order_by("-created_at", "-id"):
        if credential_is_valid(keyset):
            result.setdefault(keyset.agent_id, []).append(keyset)
    return result


KEY_HISTORY = 20  # key sets listed per party (newest first): enough to name a revoked signer


def agent_key_history(*, agent_id: str) -> list[AgentKeySet]:
    """Return `agent_id`'s newest `KEY_HISTORY` key sets, valid or not, newest first (receivers
    tell a revoked signer from an unknown one with them)."""
    return list(AgentKeySet.objects.filter(agent_id=agent_id).order_by("-created_at", "-id")[:KEY_HISTORY])


def user_key_history(*, user_id: str) -> list[UserKeySet]:
    """Return `user_id`'s newest `KEY_HISTORY` key sets in the org, valid or not, newest first."""
    return list(UserKeySet.objects.filter(user_id=user_id).order_by("-created_at", "-id")[:KEY_HISTORY])


def valid_key_ids(keysets) -> tuple[set[str], set[str]]:
    """Return `(X25519 key ids, Ed25519 key ids)` of the current and in-grace sets among `keysets`."""
    valid = [k for k in keysets if keyset_status(k) in KeyStatus.VALID]
    return {key_id(k.public_key) for k in valid}, {key_id(k.signing_public_key) for k in valid}


def conversation_page(*, agent_id: str, user_id: str, cursor: object = None, limit: object = None) -> tuple[list[Envelope], str | None]:
    """Return one page of the envelopes between `user_id` and `agent_id`, both ways, newest first,
    and the next cursor (None at the end)."""
    return _cursor_page(Envelope.objects.filter(agent_id=agent_id, user_id=user_id), cursor=cursor, limit=limit, tag="identity-conversation")


def signing_keyset(*, agent_id: str) -> AgentKeySet | None:
    """Return the newest valid key set of `agent_id` holding a webhook secret, or None."""
    for keyset in valid_keysets(agent_ids=[agent_id]).get(agent_id, []):
        if keyset.webhook_secret_encrypted:
            return keyset
    return None


def active_relations(*, agent_id: str):
    """Return the queryset of `agent_id`'s active relations."""
    return Relation.objects.filter(agent_id=agent_id, status=RelationStatus.ACTIVE)


def has_active_relation(*, agent_id: str, user_id: str) -> bool:
    """Return True when `user_id` has an active relation with `agent_id`."""
    return active_relations(agent_id=agent_id).filter(user_id=user_id).exists()


def user_relations(*, user_id: str) -> list[Relation]:
    """Return `user_id`'s active relations, newest first."""
    return list(Relation.objects.filter(user_id=user_id, status=RelationStatus.ACTIVE).order_by("-created_at"))


def user_context_agents(*, agent_id: str, user_id: str) -> list[IdentityProfile]:
    """Return the identity agents `user_id` has active relations with (spec 001 user-context).

    Only when `user_id` has an active relation with the calling agent `agent_id`; else 404.
    """
    if not has_active_relation(agent_id=agent_id, user_id=user_id):
        raise NotFound("user not found")
    ids = list(Relation.objects.filter(user_id=user_id, status=RelationStatus.ACTIVE).values_list("agent_id", flat=True))
    return list(IdentityProfile.objects.select_related("agent").filter(agent_id__in=ids).order_by("display_name"))


def deletion_preview(*, agent_id: str) -> dict:
    """Return `{"affected_h2a_count", "affected_users_count"}` of deleting `agent_id` (spec 001)."""
    relations = active_relations(agent_id=agent_id)
    return {
        "affected_h2a_count": relations.count(),
        "affected_users_count": relations.values("user_id").distinct().count(),
    }


def pending_envelopes(*, agent_id: str, after_id: int = 0, limit: int = 100) -> list[Envelope]:
    """Return `agent_id`'s unacknowledged envelopes with id > `after_id`, oldest first (WebSocket)."""
    return list(
        Envelope.objects.filter(agent_id=agent_id, direction=EnvelopeDirection.TO_AGENT, acked_at__isnull=True, id__gt=after_id)
        .order_by("id")[:limit]
    )


def inbox_page(*, user_id: str, cursor: object = None, limit: object = None) -> tuple[list[InboxItem], str | None]:
    """Return one page of `user_id`'s inbox, newest first, and the next cursor (None at the end).

    `cursor` is the previous page's `next_cursor` (items with a smaller id follow).
    """
    return _cursor_page(InboxItem.objects.filter(user_id=user_id).select_related("envelope"), cursor=cursor, limit=limit, tag="identity-inbox")


def inbox_after(*, user_id: str, after_id: int, limit: int = 500) -> list[InboxItem]:
    """Return `user_id`'s inbox items with id > `after_id`, oldest first (the SSE stream)."""
    return list(InboxItem.objects.filter(user_id=user_id, id__gt=after_id).select_related("envelope").order_by("id")[:limit])


def inbox_head(*, user_id: str) -> int:
    """Return the id of `user_id`'s newest inbox item (0 when empty)."""
    last = InboxItem.objects.filter(user_id=user_id).order_by("-id").values_list("id", flat=True).first()
    return last or 0


def delivery_page(*, agent_id: str, status: str | None = None, cursor: object = None, limit: object = None) -> tuple[list[Delivery], str | None]:
    """Return one page of `agent_id`'s webhook deliveries (newest first) with their attempts."""
    qs = Delivery.objects.filter(agent_id=agent_id).select_related("envelope")
    if status:
        if status not in DeliveryStatus.values:
            raise InvalidRequest(f"status must be one of {'|'.join(DeliveryStatus.values)}")
        qs = qs.filter(status=status)
    qs = qs.prefetch_related(Prefetch("attempt_log", queryset=DeliveryAttempt.objects.order_by("number")))
    return _cursor_page(qs, cursor=cursor, limit=limit, tag="identity-deliveries")


def delivery_get(*, public_id: str) -> Delivery:
    """Return delivery `public_id`; 404 when it is not in the org."""
    row = Delivery.objects.select_related("envelope").filter(public_id=(public_id or "")[:64]).first()
    if row is None:
        raise NotFound("delivery not found")
    return row


def retention_days() -> int:
    """Return `AGENTS_ENVELOPE_RETENTION_DAYS` (at least 1)."""
    return max(1, int(getattr(settings, "AGENTS_ENVELOPE_RETENTION_DAYS", 30)))


def backup_get(*, user_id: str) -> KeyBackup:
    """Return `user_id`'s `encrypted_backup_blob_v2` row; 404 when there is none."""
    backup = KeyBackup.objects.filter(user_id=user_id).first()
    if backup is None:
        raise NotFound("no backup")
    return backup


def anomaly_list(*, limit: int = PAGE_DEFAULT) -> list[ClientAnomaly]:
    """Return the org's newest client anomalies (at most `limit`), for its admins."""
    return list(ClientAnomaly.objects.order_by("-created_at", "-id")[:limit])


def signing_keys(*, agent_id: str) -> dict:
    """Return `{kid: Ed25519PublicKey}` of `agent_id`'s current and in-grace signing keys (what may sign its manifest)."""
    return {key_id(k.signing_public_key): Ed25519PublicKey.from_public_bytes(base64.b64decode(k.signing_public_key))
            for k in valid_keysets(agent_ids=[agent_id]).get(agent_id, [])}


def manifest_get(*, agent_id: str) -> AgentManifest:
    """Return `agent_id`'s registered capability manifest; 404 when it has none."""
    manifest = AgentManifest.objects.filter(agent_id=agent_id).first()
    if manifest is None:
        raise NotFound("the agent has registered no capability manifest")
    return manifest


def manifest_verification(manifest: AgentManifest) -> dict:
    """Check `manifest`'s stored card now, as its registration did: `manifest_format.manifest_check`
    with the agent's current and in-grace signing keys (`signing_keys`).

    Return `{"verifies": True, "kid": <key id that verified>, "reason": None, "field": None}`, or
    `{"verifies": False, "kid": None, "reason": <a key of manifest_format.REASONS>, "field": <JSON path>}`
    — `bad_signature` once no key that signed it is current or in grace (an emergency rotation, a
    re-registration of keys, a grace period over) or once the stored card was changed. One query.
    """
    try:
        _card, kid = manifest_check(manifest.card, signing_keys=signing_keys(agent_id=manifest.agent_id))
    except ManifestInvalid as exc:
        return {"verifies": False, "kid": None, "reason": exc.extras["reason"], "field": exc.extras["field"]}
    except PayloadTooLarge:  # AGENTS_MANIFEST_MAX_BYTES lowered since it was registered
        return {"verifies": False, "kid": None, "reason": "schema", "field": "manifest"}
    return {"verifies": True, "kid": kid, "reason": None, "field": None}


def manifest_key_status(manifest: AgentManifest) -> str:
    """Return the `KeyStatus` of the key that signed `manifest` now (current, grace, expired, revoked; `expired` when no set has it)."""
    for keyset in agent_key_history(agent_id=manifest.agent_id):
        if key_id(keyset.signing_public_key) == manifest.signing_kid:
            return keyset_status(keyset)
    return KeyStatus.EXPIRED
