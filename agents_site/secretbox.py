"""Secrets the platform must read back (webhook signing secrets, approval arguments until their call runs), encrypted at rest.

A hash cannot serve a secret the platform signs with, so it is kept encrypted with Fernet
(AES-128-CBC + HMAC-SHA256, `cryptography`) under the deployment key(s) in
`AGENTS_SECRETS_KEY`: comma-separated Fernet keys, the first encrypts, all decrypt
(`MultiFernet`), so a key is rotated by prepending a new one (and `rotate_secret` re-encrypts).
Unset, a development key is derived from `DJANGO_SECRET_KEY` (SHA-256) — fine on one machine,
to be replaced by a real key in production.
"""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


def _keys() -> list[Fernet]:
    raw = [k.strip() for k in (getattr(settings, "AGENTS_SECRETS_KEY", "") or "").split(",") if k.strip()]
    if not raw:
        derived = base64.urlsafe_b64encode(hashlib.sha256(("agents-secrets:" + settings.SECRET_KEY).encode()).digest())
        return [Fernet(derived)]
    return [Fernet(k.encode()) for k in raw]


def encrypt_secret(secret: str) -> str:
    """Return the Fernet token (text) of `secret` under the first deployment key."""
    return MultiFernet(_keys()).encrypt(secret.encode()).decode()


def decrypt_secret(token: str) -> str | None:
    """Return the secret encrypted in `token`, or None when no deployment key opens it."""
    try:
        return MultiFernet(_keys()).decrypt(token.encode()).decode()
    except (InvalidToken, ValueError):
        return None


def rotate_secret(token: str) -> str:
    """Return `token` re-encrypted under the first (newest) deployment key."""
    return MultiFernet(_keys()).rotate(token.encode()).decode()
