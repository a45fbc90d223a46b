"""Writes of the tenancy app: orgs, memberships and API keys (default database)."""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agents_site.errors import Conflict, InvalidRequest, NotFound
from agents_site.vocabulary import ApiKeyScope, InvitationState
from tenancy import revocation, stores
from tenancy.signals import org_created
from tenancy.models import ApiKey, Invitation, Membership, Org
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
# The scopes whose keys may also be limited to some agents (the agent is named by the request there).
LIMITED_SCOPES = (ApiKeyScope.OPENAI, ApiKeyScope.MCP)


def api_key_limits(*, scope: str | None, allowed_agents) -> tuple[str, list[str]]:
    """Return `(scope, allowed_agents)` checked and cleaned for a new API key.

    In: `scope` an `ApiKeyScope` value (None or "" = `all`); `allowed_agents` agent names or
    ids (a list, or a string split on commas and newlines; blanks dropped, duplicates kept
    once, order kept; at most 100 of at most 128 characters). A non-empty list needs scope
    `openai` or `mcp` (it limits the key on the OpenAI-compatible endpoint or the MCP server; a
    key of scope `all` can reach every agent through the rest of the API anyway). Raises `InvalidRequest` (400) with
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
    if names and scope not in LIMITED_SCOPES:
        raise InvalidRequest("allowed agents limit a key of scope 'openai' or 'mcp' only; choose one of them or name no agent")
    return str(scope), names


def api_key_create(*, org: Org, user, name: str = "", scope: str = ApiKeyScope.ALL,
                   allowed_agents: list[str] | str | None = None) -> tuple[ApiKey, str]:
    """Mint an API key for `user` in `org`; return `(row, key)`. The key is never stored.

    Key: `ak_` + 48 hex characters (24 random bytes). `scope` and `allowed_agents` limit what
    it may call (`api_key_limits`: `all`, `openai` = only `/v1/agents/openai/…`, or `mcp` = only
    `/v1/agents/mcp`, optionally only the named agents there). Raises `NotFound` if `user` is not a member of `org`,
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


# --- members, roles and invitations (console → Members; the org's admin pages) ---------------

INVITATION_PREFIX = "inv_"
USERNAME_MAX = 150


LAST_ADMIN = "an org keeps at least one admin: make another member an admin first"


def _admins_left_without(*, org: Org, user_id: int) -> int:
    return Membership.objects.filter(org=org, is_admin=True).exclude(user_id=user_id).count()


def membership_change_refusal(*, membership: Membership, is_admin: bool | None = None, removing: bool = False) -> str | None:
    """Return why `membership` may not lose its admin role (`is_admin=False`) or be removed, else None.

    The one rule both the console and the admin apply: an org keeps at least one admin.
    """
    losing_admin = membership.is_admin and (removing or is_admin is False)
    if losing_admin and _admins_left_without(org=membership.org, user_id=membership.user_id) == 0:
        return LAST_ADMIN
    return None


def membership_role_set(*, org: Org, user_id: int, is_admin: bool) -> Membership:
    """Make member `user_id` of `org` an admin (`is_admin=True`) or a plain member.

    Raises `NotFound` (404) when the user is not a member of `org`; `Conflict` (409) when it
    would leave the org with no admin. A member made plain keeps their keys, whose next request
    (and every connection they open from then on) acts as a member.
    """
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(org=org, user_id=user_id).first()
        if membership is None:
            raise NotFound("member not found")
        refusal = membership_change_refusal(membership=membership, is_admin=is_admin)
        if refusal:
            raise Conflict(refusal)
        if membership.is_admin != is_admin:
            membership.is_admin = is_admin
            membership.save(update_fields=["is_admin"])
    return membership


def member_remove(*, org: Org, user_id: int) -> int:
    """Remove member `user_id` from `org` as an admin does (`membership_remove`), keeping one admin.

    Raises `Conflict` (409) for the org's last admin, `NotFound` (404) for a non-member.
    Returns how many API keys were revoked.
    """
    membership = Membership.objects.filter(org=org, user_id=user_id).first()
    if membership is None:
        raise NotFound("member not found")
    refusal = membership_change_refusal(membership=membership, removing=True)
    if refusal:
        raise Conflict(refusal)
    return membership_remove(org=org, user_id=user_id)


def _check_password(password: str, user=None) -> None:
    try:
        password_validation.validate_password(password, user)
    except ValidationError as exc:
        raise InvalidRequest(" ".join(exc.messages)) from exc


def member_user_create(*, org: Org, username: str, password: str, is_admin: bool = False) -> Membership:
    """Create a new user `username` with a first `password` and make it a member of `org`.

    Users are global: only a name no user has yet can be created here; an existing user joins
    by accepting an invitation. Raises `InvalidRequest` (400) for an empty or malformed name or
    a password the site's password rules refuse (their words), `Conflict` (409) when the name
    is taken.
    """
    User = get_user_model()
    username = (username or "").strip()
    if not username:
        raise InvalidRequest("a user name is required")
    try:
        User._meta.get_field(User.USERNAME_FIELD).run_validators(username)
    except ValidationError as exc:
        raise InvalidRequest(" ".join(exc.messages)) from exc
    if len(username) > USERNAME_MAX:
        raise InvalidRequest(f"a user name is at most {USERNAME_MAX} characters")
    candidate = User(username=username)
    _check_password(password or "", candidate)
    with transaction.atomic():
        if User.objects.filter(username__iexact=username).exists():
            raise Conflict("a user of that name exists: send them an invitation link instead")
        user = User.objects.create_user(username=username, password=password)
        membership = Membership.objects.create(user=user, org=org, is_admin=is_admin)
    return membership


def member_password_set(*, org: Org, user_id: int, password: str) -> None:
    """Set the first password of member `user_id`, a user of `org` only who never signed in.

    An org admin may set a password only for a user no other org shares and who has not
    signed in yet (a user they created): never for a user who belongs elsewhere or already uses
    their account. Raises `NotFound` (404) for a non-member, `Conflict` (409) for a user of
    another org or one who signed in, `InvalidRequest` (400) for a refused password.
    """
    membership = Membership.objects.filter(org=org, user_id=user_id).select_related("user").first()
    if membership is None:
        raise NotFound("member not found")
    user = membership.user
    if Membership.objects.filter(user_id=user_id).exclude(org=org).exists():
        raise Conflict("this user belongs to another org too: only they can change their password")
    if user.last_login is not None:
        raise Conflict("this user has signed in already: only they can change their password")
    _check_password(password or "", user)
    user.set_password(password)
    user.save(update_fields=["password"])


def _invitation_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def invitation_create(*, org: Org, created_by=None, is_admin: bool = False, note: str = "") -> tuple[Invitation, str]:
    """Make an invitation link's token for `org`; return `(row, token)`. The token is never stored.

    Token: `inv_` + 43 URL-safe characters (32 random bytes). It works once, for
    `AGENTS_INVITE_TTL_HOURS` (72) hours; the one who accepts joins as an admin when `is_admin`.
    """
    token = INVITATION_PREFIX + secrets.token_urlsafe(32)
    expires_at = timezone.now() + timedelta(hours=int(getattr(settings, "AGENTS_INVITE_TTL_HOURS", 72)))
    row = Invitation.objects.create(org=org, token_hash=_invitation_hash(token), is_admin=is_admin, note=(note or "").strip()[:200],
                                    created_by=created_by, expires_at=expires_at)
    return row, token


def invitation_find(*, token: str) -> Invitation:
    """Return the pending invitation of `token`; raise `NotFound` (404) when it is unknown, used, revoked or expired.

    The four are not told apart: a link that does not work says only that.
    """
    token = (token or "").strip()
    row = None
    if token.startswith(INVITATION_PREFIX) and len(token) <= 100:
        row = Invitation.objects.filter(token_hash=_invitation_hash(token)).select_related("org").first()
    if row is None or row.state(timezone.now()) != InvitationState.PENDING:
        raise NotFound("this invitation link is unknown, used, withdrawn or expired")
    return row


def invitation_accept(*, token: str, user) -> Membership:
    """Let signed-in `user` join the org of invitation `token`, once; return the new membership.

    Exactly one acceptance wins (the row is stamped by a conditional update). Raises `NotFound`
    (404) for a link that does not work (`invitation_find`), `Conflict` (409) when `user` is a
    member of that org already (the link stays usable for someone else).
    """
    row = invitation_find(token=token)
    with transaction.atomic():
        if Membership.objects.filter(org_id=row.org_id, user=user).exists():
            raise Conflict(f"you are a member of {row.org.slug} already")
        now = timezone.now()
        won = Invitation.objects.filter(pk=row.pk, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now).update(
            accepted_at=now, accepted_by=user)
        if not won:
            raise NotFound("this invitation link is unknown, used, withdrawn or expired")
        membership = Membership.objects.create(user=user, org_id=row.org_id, is_admin=row.is_admin)
    return membership


def invitation_revoke(*, org: Org, invitation_id: int) -> Invitation:
    """Withdraw a pending invitation of `org` (idempotent); `NotFound` (404) for another org's."""
    row = Invitation.objects.filter(org=org, pk=invitation_id).first()
    if row is None:
        raise NotFound("invitation not found")
    if row.accepted_at is None and row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
    return row
