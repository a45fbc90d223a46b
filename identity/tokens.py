"""Agent tokens: minted, shown once, stored as bcrypt, verified (spec 001 "agent token").

Form: `agt_<org slug>_<token id: 16 hex>_<secret: 48 hex>`. The org slug and the token id are
not secret: they route the token to its org's store and select its row in one indexed lookup;
only bcrypt(secret) (cost 10, `identity.passwords`) is stored, so the token is never on disk.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from agents_site.errors import Forbidden
from identity.passwords import check_password, hash_password
from tenancy import stores
from identity.models import AgentCredential, IdentityProfile

TOKEN_PREFIX = "agt_"
_TOKEN_RE = re.compile(r"^agt_([a-z0-9][a-z0-9-]{0,62})_([0-9a-f]{16})_([0-9a-f]{48})$")
LAST_USED_RESOLUTION = timedelta(seconds=60)


@dataclass(frozen=True)
class AgentCaller:
    """A request authenticated by an agent token: the agent `agent_id` of org `org_slug`."""

    org_slug: str
    agent_id: str
    credential_id: int
    token_id: str


def mint_token(org_slug: str) -> tuple[str, str, str]:
    """Return `(token, token_id, secret_hash)` for a new token of org `org_slug`."""
    token_id = secrets.token_hex(8)
    secret = secrets.token_hex(24)
    return f"{TOKEN_PREFIX}{org_slug}_{token_id}_{secret}", token_id, hash_password(secret)


def credential_is_valid(credential, *, now=None) -> bool:
    """Return True when `credential` (or a key set: same fields) is neither revoked nor expired."""
    now = now or timezone.now()
    return credential.revoked_at is None and (credential.expires_at is None or credential.expires_at > now)


def authenticate_token(token: str) -> AgentCaller:
    """Return the caller of agent token `token`; raise `Forbidden` (403) for anything else.

    Unknown, malformed, revoked, past its grace period, or of a deleted agent: all 403 with a
    sentence saying which. Opens the org store only if it exists (never creates one).
    """
    match = _TOKEN_RE.fullmatch(token or "")
    if match is None:
        raise Forbidden("the agent token is malformed")
    slug, token_id, secret = match.groups()
    try:
        with stores.org_context(slug, create=False):
            credential = AgentCredential.objects.filter(token_id=token_id).first()
            if credential is None or not check_password(secret, credential.token_hash):
                raise Forbidden("the agent token is unknown")
            now = timezone.now()
            if credential.revoked_at is not None:
                raise Forbidden("the agent token was revoked")
            if credential.expires_at is not None and credential.expires_at <= now:
                raise Forbidden("the agent token's grace period is over")
            if not IdentityProfile.objects.filter(agent_id=credential.agent_id).exists():
                raise Forbidden("the agent token's agent no longer exists")
            if credential.last_used_at is None or now - credential.last_used_at > LAST_USED_RESOLUTION:
                AgentCredential.objects.filter(pk=credential.pk).update(last_used_at=now)
            return AgentCaller(org_slug=slug, agent_id=credential.agent_id, credential_id=credential.pk, token_id=token_id)
    except stores.StoreMissing as exc:
        raise Forbidden("the agent token is unknown") from exc


def credential_still_valid(*, org_slug: str, credential_id: int) -> bool:
    """Return True while credential `credential_id` of org `org_slug` is valid (WebSocket re-checks)."""
    with stores.org_context(org_slug, create=False):
        credential = AgentCredential.objects.filter(pk=credential_id).first()
        return credential is not None and credential_is_valid(credential)
