"""The one password helper for every hashed agent secret (spec 001: one `hashPassword`).

bcrypt, cost 10: `hash_password("…")` → `"$2b$10$…"` (60 characters). Agent tokens go through
here; nothing else hashes an agent secret (a test asserts the stored form).
"""

from __future__ import annotations

import bcrypt

BCRYPT_COST = 10
MAX_SECRET_BYTES = 72  # bcrypt ignores (bcrypt 5 refuses) anything longer


def hash_password(secret: str) -> str:
    """Return the bcrypt (cost 10) hash of `secret` as text, e.g. `$2b$10$N9qo8uLO…`.

    Raises `ValueError` for a secret over 72 bytes (bcrypt would silently cut it).
    """
    raw = secret.encode()
    if len(raw) > MAX_SECRET_BYTES:
        raise ValueError("secret longer than bcrypt's 72 bytes")
    return bcrypt.hashpw(raw, bcrypt.gensalt(rounds=BCRYPT_COST)).decode()


def check_password(secret: str, hashed: str) -> bool:
    """Return True when `secret` matches the bcrypt `hashed`; False for any mismatch or junk."""
    try:
        return bcrypt.checkpw(secret.encode(), hashed.encode())
    except ValueError:
        return False
