"""Who is calling: the validated principal and the org it acts for.

Resolution order (first credential present wins):
1. `Authorization: Bearer ak_…` — an API key bound to one user and one org (SHA-256 at rest).
2. `Authorization: Bearer <jwt>` — a gateway JWT, only when `AGENTS_GATEWAY_JWT_KEY` is set
   (HS256; claims `sub`, `org`, `org_admin`, `exp`).
3. The Django session login — the org chosen among the user's memberships. A login whose
   membership (the one it acted through) was removed is logged out on its next request.

A credential that is present but unknown, revoked, expired or forged raises `Forbidden`; it
never falls through to the next kind. A valid API key's principal is kept a few seconds per
process (`_from_api_key`); revocation reaches that cache at once through `tenancy.revocation`.
The org is never taken from a body, query or path.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import timedelta

import jwt
from django.conf import settings
from django.contrib.auth import logout
from django.db.models.signals import post_delete, post_save
from django.utils import timezone

from agents_site.errors import Forbidden
from agents_site.vocabulary import ApiKeyScope, PrincipalVia
from tenancy import revocation
from tenancy.models import ApiKey, Membership, Org
from tenancy.queries import api_key_row
from tenancy.stores import InvalidOrg, validate_slug

API_KEY_PREFIX = "ak_"
SESSION_ORG_KEY = "agents_org"
# The membership a console login last acted through; once it is removed the login is logged out.
SESSION_MEMBERSHIP_KEY = "agents_membership"
LAST_USED_RESOLUTION = timedelta(seconds=60)
# The paths a limited API key may call (`ApiKeyScope`); a key of scope `all` may call every path.
SCOPE_PATHS = {ApiKeyScope.OPENAI: "/v1/agents/openai/v1/", ApiKeyScope.MCP: "/v1/agents/mcp"}


@dataclass(frozen=True)
class Principal:
    """A validated caller: `subject` (username or JWT `sub`) acting for `org_slug`.

    `org_slug` is None for a user with no membership (every org route answers 403 then).
    """

    subject: str
    via: PrincipalVia
    org_slug: str | None
    is_org_admin: bool = False
    user_id: int | None = None
    api_key_id: int | None = None
    scope: str = ApiKeyScope.ALL
    allowed_agents: tuple[str, ...] = ()

    @property
    def actor(self) -> str:
        """Return the billing actor `"<org>/<subject>"` (spec reference §5 billingActor)."""
        if self.org_slug and self.subject:
            return f"{self.org_slug}/{self.subject}"
        return self.subject or self.org_slug or ""

    def may_use_agent(self, *, agent_id: str, agent_name: str) -> bool:
        """Return True when this principal's key names no agents, or names this one (by name or id)."""
        return not self.allowed_agents or agent_name in self.allowed_agents or agent_id in self.allowed_agents


def hash_api_key(key: str) -> str:
    """Return the SHA-256 hex of an API key, as stored."""
    return hashlib.sha256(key.encode()).hexdigest()


def _bearer(request) -> str | None:
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if not header:
        return None
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Forbidden("the Authorization header must be 'Bearer <credential>'")
    return token.strip()


# The validated principals of API keys this process answered lately (issue 59): key hash →
# (monotonic expiry, `revocation.position()` taken before the read, revocation keys, principal).
_cache: OrderedDict[str, tuple[float, tuple, frozenset, Principal]] = OrderedDict()
_cache_lock = threading.Lock()
CACHE_MAX_KEYS = 4096


def _cached_principal(key_hash: str) -> Principal | None:
    """Return the principal cached for `key_hash` if it is fresh and nothing revoked it since, else None."""
    entry = _cache.get(key_hash)
    if entry is None:
        return None
    expires, since, keys, principal = entry
    if time.monotonic() >= expires or revocation.revoked_since(keys, since):
        with _cache_lock:
            if _cache.get(key_hash) is entry:
                del _cache[key_hash]
        return None
    return principal


def _remember(key_hash: str, principal: Principal, since: tuple) -> None:
    seconds = settings.AGENTS_API_KEY_CACHE_SECONDS
    if seconds <= 0:
        return
    keys = revocation.principal_keys(principal) | {revocation.credential_changed(principal.user_id)}
    with _cache_lock:
        _cache[key_hash] = (time.monotonic() + seconds, since, keys, principal)
        _cache.move_to_end(key_hash)
        while len(_cache) > CACHE_MAX_KEYS:
            _cache.popitem(last=False)


def forget_cached_principals() -> None:
    """Drop every API-key principal this process keeps (a key, membership or user row changed here).

    Model signals call it (`connect_cache_signals`) the moment such a row is saved or deleted,
    committed or not; other processes learn it from `revocation.credential_changed` once the change commits.
    """
    with _cache_lock:
        _cache.clear()


def _credential_row_changed(sender, instance, created: bool = False, update_fields=None, using: str = "default", **kwargs) -> None:
    """Drop this process's cached API-key principals now; tell every process once the change commits.

    A new row cannot be behind a cached principal, nor can a login's `last_login` stamp: both are skipped.
    """
    if created or (update_fields is not None and set(update_fields) <= {"last_login", "last_used_at"}):
        return
    forget_cached_principals()
    user_id = getattr(instance, "user_id", instance.pk)  # a key or a membership names its user; a user is one
    if user_id is not None:
        revocation.revoke_on_commit([revocation.credential_changed(user_id)], using=using)


def connect_cache_signals() -> None:
    """Connect `_credential_row_changed` to every save and delete of a key, a membership and a user.

    Why signals: such a row may change through any code path (a service, the admin, a shell) and
    the cache must hear of each; only model signals see them all. Called when this module is
    imported (below): the cache is empty until then, so no change before can matter.
    """
    for label in ("tenancy.ApiKey", "tenancy.Membership", settings.AUTH_USER_MODEL):
        post_save.connect(_credential_row_changed, sender=label, dispatch_uid=f"principal-cache-save-{label}")
        post_delete.connect(_credential_row_changed, sender=label, dispatch_uid=f"principal-cache-delete-{label}")


def _from_api_key(token: str) -> Principal:
    """Return the principal of API key `token`; raise `Forbidden` for an unknown, revoked or orphaned key.

    A valid key's principal is kept `AGENTS_API_KEY_CACHE_SECONDS` per process, keyed by the key's
    SHA-256 (at most `CACHE_MAX_KEYS`, the least recently used dropped first). A revocation of the
    key, of its user's membership or of its org, and a change to the user's keys, memberships or
    account, reach the cache through the revocation broadcast (`tenancy.revocation.revoked_since`):
    the very next request reads the row again and is refused. Refusals are never cached.
    `last_used_at` is stamped when the row is read and stale (at most once a minute per key).
    """
    key_hash = hash_api_key(token)
    cached = _cached_principal(key_hash)
    if cached is not None:
        return cached
    since = revocation.position()  # before the read: a revocation racing it is not missed
    now = timezone.now()
    key = api_key_row(key_hash=key_hash, stale_before=now - LAST_USED_RESOLUTION)
    if key is None or key.revoked or not key.user_active:
        raise Forbidden("the API key is unknown or revoked")
    if key.member_admin is None:
        raise Forbidden("the API key's user is no longer a member of its org")
    if key.stale_stamp:  # at most one write a minute per key
        ApiKey.objects.filter(pk=key.key_id).update(last_used_at=now)
    principal = Principal(
        subject=key.username,
        via=PrincipalVia.API_KEY,
        org_slug=key.org_slug,
        is_org_admin=key.member_admin,
        user_id=key.user_id,
        api_key_id=key.key_id,
        scope=key.scope,
        allowed_agents=tuple(str(name) for name in (key.allowed_agents or [])),
    )
    _remember(key_hash, principal, since)
    return principal


def _from_jwt(token: str, secret: str) -> Principal:
    try:
        claims = jwt.decode(token, secret, algorithms=["HS256"], options={"require": ["sub", "org", "exp"]})
    except jwt.PyJWTError as exc:
        raise Forbidden("the gateway token is invalid or expired") from exc
    subject = str(claims.get("sub") or "").strip()
    org = str(claims.get("org") or "").strip()
    if not subject:
        raise Forbidden("a validated principal is required")
    try:
        validate_slug(org)
    except InvalidOrg as exc:
        raise Forbidden("an org scope is required") from exc
    Org.objects.get_or_create(slug=org, defaults={"name": org})
    # Only a JSON true (or the string "true") grants admin: bool("false") would be True.
    org_admin = claims.get("org_admin")
    is_org_admin = org_admin is True or (isinstance(org_admin, str) and org_admin.strip().lower() == "true")
    return Principal(subject=subject, via=PrincipalVia.JWT, org_slug=org, is_org_admin=is_org_admin)


def _from_session(request) -> Principal | None:
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None
    memberships = list(Membership.objects.filter(user_id=user.pk).select_related("org").order_by("org__slug"))
    chosen = None
    session = getattr(request, "session", None)
    wanted = session.get(SESSION_ORG_KEY) if session is not None else None
    for membership in memberships:
        if membership.org.slug == wanted:
            chosen = membership
    if chosen is None and memberships:
        chosen = memberships[0]
    if session is not None:
        acted = session.get(SESSION_MEMBERSHIP_KEY)
        if acted is not None and all(m.pk != acted for m in memberships):
            # The membership this login acted through was removed: the login ends here.
            logout(request)
            return None
        if chosen is not None and acted != chosen.pk:
            session[SESSION_MEMBERSHIP_KEY] = chosen.pk
    return Principal(
        subject=user.get_username(),
        via=PrincipalVia.SESSION,
        org_slug=chosen.org.slug if chosen else None,
        is_org_admin=bool(chosen and chosen.is_admin),
        user_id=user.pk,
    )


def resolve_principal(request) -> Principal | None:
    """Return the principal of `request`, or None when it carries no credential at all.

    Raises `Forbidden` (403) for a credential that is present but unknown, revoked, expired,
    forged or malformed.
    """
    token = _bearer(request)
    if token is not None:
        if token.startswith(API_KEY_PREFIX):
            return _from_api_key(token)
        secret = settings.AGENTS_GATEWAY_JWT_KEY
        if secret:
            return _from_jwt(token, secret)
        raise Forbidden("the bearer credential is not recognised")
    return _from_session(request)


def scope_refusal(principal: Principal | None, path: str) -> Forbidden | None:
    """Return the 403 for a limited API key calling `path` outside its scope, else None.

    Example: a key of scope `openai` on `/v1/agents` → `Forbidden` naming the path it may call;
    the same key on `/v1/agents/openai/v1/models` → None; a key of scope `mcp` on
    `/v1/agents/mcp` → None, on `/v1/agents/mcpbot/run` → `Forbidden`.
    """
    if principal is None or principal.scope == ApiKeyScope.ALL:
        return None
    allowed = SCOPE_PATHS.get(principal.scope)
    # A path ending in "/" allows what is under it; another allows itself (and with a "/"), so
    # `/v1/agents/mcp` never lets an `mcp` key reach an agent named `mcpbot`.
    if allowed and (path.startswith(allowed) if allowed.endswith("/") else path in (allowed, allowed + "/")):
        return None
    return Forbidden(f"this API key is limited to {allowed or 'no path'}; use a key of scope 'all' for {path}")


def require_org(principal: Principal | None) -> Principal:
    """Return `principal` if it acts for an org; raise `Forbidden` otherwise.

    Messages follow the reference (§2.0): no principal → "a validated principal is required";
    a principal with no org → "an org scope is required".
    """
    if principal is None or not principal.subject:
        raise Forbidden("a validated principal is required")
    if not principal.org_slug:
        raise Forbidden("an org scope is required")
    return principal


connect_cache_signals()
