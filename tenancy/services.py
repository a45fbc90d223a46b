"""Writes of the tenancy app: orgs, memberships and API keys (default database)."""

import secrets

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from agents_site.errors import InvalidRequest, NotFound
from agents_site.vocabulary import ApiKeyScope
from tenancy import revocation, stores
from tenancy.signals import org_created
from tenancy.models import ApiKey, Membership, Org
from tenancy.principal import API_KEY_PREFIX, hash_api_key


def org_create(*, slug: str, name: str = "") -> Org:
    """Create org `slug` (or return the existing one) and open its store.

    Raises `InvalidRequest` (400) for a slug outside `^[a-z0-9][a-z0-9-]{0,62}$`.
    """
    try:
        stores.validate_slug(slug)
    except stores.InvalidOrg as exc:
        raise InvalidRequest("org slug must match ^[a-z0-9][a-z0-9-]{0,62}$") from exc
    org, _ = Org.objects.get_or_create(slug=slug, defaults={"name": name or slug})
    org_created.send(sender=Org, org=org)  # billing opens the org's account
    stores.open_store(slug)
    return org


def membership_set(*, org: Org, username: str, password: str | None = None, is_admin: bool = False) -> Membership:
    """Create user `username` if needed (with `password`) and make it a member of `org`."""
    User = get_user_model()
    with transaction.atomic():
        user, created = User.objects.get_or_create(username=username)
        if password:
            user.set_password(password)
            user.save()
        elif created:
            user.set_unusable_password()
            user.save()
        membership, _ = Membership.objects.update_or_create(user=user, org=org, defaults={"is_admin": is_admin})
    return membership


MAX_ALLOWED_AGENTS = 100
MAX_AGENT_REF_LENGTH = 128


def api_key_limits(*, scope: str | None, allowed_agents) -> tuple[str, list[str]]:
    """Return `(scope, allowed_agents)` checked and cleaned for a new API key.

    In: `scope` an `ApiKeyScope` value (None or "" = `all`); `allowed_agents` agent names or
    ids (a list, or a string split on commas and newlines; blanks dropped, duplicates kept
    once, order kept; at most 100 of at most 128 characters). A non-empty list needs scope
    `openai` (it limits the key on the OpenAI-compatible endpoint; a key of scope `all` can
    reach every agent through the rest of the API anyway). Raises `InvalidRequest` (400) with
    the reason. Example: `("openai", "writer, bot, writer")` → `("openai", ["writer", "bot"])`.
    """
    scope = str(scope or ApiKeyScope.ALL).strip()
    if scope not in ApiKeyScope.values:
        raise InvalidRequest(f"scope must be one of: {', '.join(ApiKeyScope.values)}")
    if isinstance(allowed_agents, str):
        allowed_agents = allowed_agents.replace("\n", ",").split(",")
    names: list[str] = []
    for entry in allowed_agents or []:
        if not isinstance(entry, str):
            raise InvalidRequest("allowed agents must be agent names or ids (text)")
        entry = entry.strip()
        if not entry:
            continue
        if len(entry) > MAX_AGENT_REF_LENGTH:
            raise InvalidRequest(f"an allowed agent is at most {MAX_AGENT_REF_LENGTH} characters")
        if entry not in names:
            names.append(entry)
    if len(names) > MAX_ALLOWED_AGENTS:
        raise InvalidRequest(f"at most {MAX_ALLOWED_AGENTS} allowed agents per key")
    if names and scope != ApiKeyScope.OPENAI:
        raise InvalidRequest("allowed agents limit a key of scope 'openai' only; choose that scope or name no agent")
    return str(scope), names


def api_key_create(*, org: Org, user, name: str = "", scope: str = ApiKeyScope.ALL,
                   allowed_agents: list[str] | str | None = None) -> tuple[ApiKey, str]:
    """Mint an API key for `user` in `org`; return `(row, key)`. The key is never stored.

    Key: `ak_` + 48 hex characters (24 random bytes). `scope` and `allowed_agents` limit what
    it may call (`api_key_limits`: `all`, or `openai` = only `/v1/agents/openai/…`, optionally
    only the named agents there). Raises `NotFound` if `user` is not a member of `org`,
    `InvalidRequest` (400) for limits `api_key_limits` refuses.
    """
    scope, names = api_key_limits(scope=scope, allowed_agents=allowed_agents)
    if not Membership.objects.filter(user=user, org=org).exists():
        raise NotFound("user is not a member of this org")
    key = API_KEY_PREFIX + secrets.token_hex(24)
    row = ApiKey.objects.create(org=org, user=user, name=name[:100], prefix=key[:10], key_hash=hash_api_key(key),
                                scope=scope, allowed_agents=names)
    return row, key


def api_key_revoke(*, org: Org, key_id: int) -> ApiKey:
    """Revoke API key `key_id` of `org` (idempotent); raise `NotFound` for another org's key."""
    row = ApiKey.objects.filter(org=org, pk=key_id).first()
    if row is None:
        raise NotFound("API key not found")
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
    # Every open connection the key authorised closes, in every process (idempotent too).
    revocation.revoke_on_commit([revocation.key_revoked(row.pk)])
    return row


def membership_remove(*, org: Org, user_id: int) -> int:
    """Remove user `user_id` from `org`: revoke their keys there, close their connections.

    The user row is never edited (users are global; they may belong to other orgs). Every API
    key of the user in `org` is revoked; once committed, every open connection of the user
    acting for `org` (streams, long-polls, streamed replies) closes in every process, and a
    console login that acted for `org` is logged out on its next request. Returns how many
    keys were revoked. Raises `NotFound` when the user is not a member of `org` (another
    org's member included).
    """
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(org=org, user_id=user_id).first()
        if membership is None:
            raise NotFound("member not found")
        key_ids = list(ApiKey.objects.filter(org=org, user_id=user_id, revoked_at__isnull=True).values_list("pk", flat=True))
        ApiKey.objects.filter(pk__in=key_ids).update(revoked_at=timezone.now())
        membership.delete()
        revocation.revoke_on_commit([revocation.member_removed(org.slug, user_id),
                                     *(revocation.key_revoked(pk) for pk in key_ids)])
    return len(key_ids)


def org_delete(*, org: Org) -> None:
    """Delete `org`'s row with its memberships and API keys; close its open connections.

    Once committed, every open connection acting for the org closes in every process. The
    org's store (its file or database) is left as it is, for its backups and an operator.
    """
    slug = org.slug
    with transaction.atomic():
        org.delete()
        revocation.revoke_on_commit([revocation.org_deleted(slug)])
