"""Validation of the keys an identity agent registers (spec 001: POST …/keys/register).

* `public_key`: X25519, base64 of 32 bytes, loaded by `cryptography`; a point whose
  Diffie-Hellman result is all-zero (the all-zero point and the other low-order points) is
  refused — `cryptography` raises on such an exchange.
* `signing_public_key`: Ed25519, base64 of 32 bytes, loaded by `cryptography` and decoded as
  a curve point (RFC 8032 §5.1.3); non-canonical encodings, points off the curve and
  small-order points (8·P = identity) are refused: they verify forged signatures.
* `webhook_secret`: the Standard Webhooks form `whsec_<base64>` of at least 24 random bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from django.utils import timezone

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import KeyStatus

KEY_BYTES = 32
WEBHOOK_SECRET_PREFIX = "whsec_"
WEBHOOK_SECRET_MIN_BYTES = 24

# Ed25519 curve constants (RFC 8032).
_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)
_URLSAFE = str.maketrans("-_", "+/")


def _b64(value: object, field: str) -> bytes:
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest(f"{field} is required (base64 of {KEY_BYTES} bytes)")
    text = value.strip().translate(_URLSAFE)  # standard or URL-safe alphabet, padded or not
    text += "=" * (-len(text) % 4)
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest(f"{field} is not valid base64") from exc
    if len(raw) != KEY_BYTES:
        raise InvalidRequest(f"{field} must be {KEY_BYTES} bytes, got {len(raw)}")
    return raw


def validate_x25519(value: object, field: str = "public_key") -> str:
    """Return the canonical base64 of a usable X25519 public key; raise `InvalidRequest` (400)."""
    raw = _b64(value, field)
    try:
        key = X25519PublicKey.from_public_bytes(raw)
        X25519PrivateKey.generate().exchange(key)  # raises for an all-zero (low-order) result
    except ValueError as exc:
        raise InvalidRequest(f"{field} is not a usable X25519 public key (low-order or invalid point)") from exc
    return base64.b64encode(raw).decode()


def _ed_decode(raw: bytes) -> tuple[int, int] | None:
    """Return the affine point of an Ed25519 encoding, or None when it is not a canonical point."""
    y = int.from_bytes(raw, "little") & ((1 << 255) - 1)
    sign = raw[31] >> 7
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    if x2 == 0:
        return None if sign else (0, y)
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
    if (x * x - x2) % _P:
        return None
    if x & 1 != sign:
        x = _P - x
    return x, y


def _ed_add(p1: tuple[int, int], p2: tuple[int, int]) -> tuple[int, int]:
    (x1, y1), (x2, y2) = p1, p2
    t = _D * x1 * x2 * y1 * y2 % _P
    x3 = (x1 * y2 + x2 * y1) * pow(1 + t, _P - 2, _P) % _P
    y3 = (y1 * y2 + x1 * x2) * pow(1 - t, _P - 2, _P) % _P
    return x3, y3


def validate_ed25519(value: object, field: str = "signing_public_key") -> str:
    """Return the canonical base64 of a usable Ed25519 public key; raise `InvalidRequest` (400)."""
    raw = _b64(value, field)
    try:
        Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise InvalidRequest(f"{field} is not an Ed25519 public key") from exc
    point = _ed_decode(raw)
    if point is None:
        raise InvalidRequest(f"{field} is not a point on Ed25519")
    eight = point
    for _ in range(3):
        eight = _ed_add(eight, eight)
    if eight == (0, 1):
        raise InvalidRequest(f"{field} is a small-order Ed25519 point")
    return base64.b64encode(raw).decode()


def validate_webhook_secret(value: object) -> str:
    """Return `value` if it is `whsec_<base64>` of ≥ 24 bytes; raise `InvalidRequest` (400)."""
    if not isinstance(value, str) or not value.startswith(WEBHOOK_SECRET_PREFIX):
        raise InvalidRequest(f"webhook_secret must be '{WEBHOOK_SECRET_PREFIX}<base64>'")
    body = value[len(WEBHOOK_SECRET_PREFIX):]
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidRequest("webhook_secret is not valid base64 after 'whsec_'") from exc
    if len(raw) < WEBHOOK_SECRET_MIN_BYTES:
        raise InvalidRequest(f"webhook_secret must hold at least {WEBHOOK_SECRET_MIN_BYTES} random bytes")
    if len(set(raw)) <= 2:
        raise InvalidRequest("webhook_secret is not random")
    return value


def key_id(public_key_b64: str) -> str:
    """Return the key id of a registered public key (docs/envelopes.md): hex of SHA-256(raw)[:8].

    Example: the key id of 32 zero bytes is `"66687aadf862bd77"`.
    """
    return hashlib.sha256(base64.b64decode(public_key_b64)).hexdigest()[:16]


def keyset_status(keyset, *, now=None) -> str:
    """Return the `KeyStatus` of an agent's or a user's key set (revoked, expired, grace or current)."""
    now = now or timezone.now()
    if keyset.revoked_at is not None:
        return KeyStatus.REVOKED
    if keyset.expires_at is None:
        return KeyStatus.CURRENT
    return KeyStatus.GRACE if keyset.expires_at > now else KeyStatus.EXPIRED
