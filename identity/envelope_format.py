"""The outer shape of a v1 envelope, as the platform checks it (docs/envelopes.md).

The platform never decrypts: it reads the header part only — version, message id, the two
parties, the recipient's and the sender's key ids — and the size. `outer_shape` refuses what is
not a v1 envelope (400 `invalid_request`) or is too large (413); the routing checks (the header
names the sender and recipient the request routes between; the key ids are keys of theirs) are
made by `identity.messaging` with the store at hand.

Shape: `v1.<header>.<sealed>.<signature>`, each part base64url without padding; the header a
UTF-8 JSON object `{"v": "v1", "mid", "from": {type, id}, "to": {type, id}, "rkid", "skid", "ts"}`.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass

from django.conf import settings

from agents_site.errors import InvalidRequest, PayloadTooLarge
from agents_site.vocabulary import EnvelopeParty

VERSION = "v1"
MAX_HEADER_BYTES = 2048
MIN_SEALED_BYTES = 48  # the 32-byte HPKE enc and the 16-byte AEAD tag
SIGNATURE_BYTES = 64
_PART = re.compile(r"^[A-Za-z0-9_-]+$")
_MID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
_KID = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class OuterShape:
    """What the platform reads of an envelope: ids and key ids, never the content."""

    message_id: str
    sender_type: str
    sender_id: str
    recipient_type: str
    recipient_id: str
    rkid: str
    skid: str
    size_bytes: int

    @property
    def sender(self) -> str:
        """`"<type>:<id>"`: the sender half of the (sender, message id) uniqueness key."""
        return f"{self.sender_type}:{self.sender_id}"


def max_envelope_bytes() -> int:
    """Return `AGENTS_ENVELOPE_MAX_BYTES` (default 262144 = 256 KiB): the largest envelope string accepted."""
    return int(getattr(settings, "AGENTS_ENVELOPE_MAX_BYTES", 256 * 1024))


def _refuse(message: str) -> InvalidRequest:
    return InvalidRequest(f"the envelope is not a v1 envelope: {message} (docs/envelopes.md)", fields=[{"field": "envelope", "message": message}])


def _decode(part: str, what: str) -> bytes:
    if not _PART.fullmatch(part):
        raise _refuse(f"its {what} part is not base64url")
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise _refuse(f"its {what} part is not base64url") from None


def _party(value: object, where: str) -> tuple[str, str]:
    if not isinstance(value, dict) or value.get("type") not in EnvelopeParty.values or not isinstance(value.get("id"), str) or not value["id"]:
        raise _refuse(f"header.{where} must be {{\"type\": \"user\"|\"agent\", \"id\": …}}")
    return value["type"], value["id"][:300]


def outer_shape(value: object) -> OuterShape:
    """Return the outer shape of envelope `value`; 400 when it is not v1, 413 over the size limit.

    Example: `outer_shape("v1.eyJ2Ijoi….….…").rkid` → `"9c1d0e4f5a6b7c8d"`. The content is never
    decoded beyond the header; the sealed and signature parts are checked for length only.
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidRequest("envelope is required (a v1 envelope, docs/envelopes.md)", fields=[{"field": "envelope", "message": "required"}])
    text = value.strip()
    limit = max_envelope_bytes()
    if len(text) > limit:
        raise PayloadTooLarge(f"the envelope exceeds {limit} bytes", limit=limit)
    parts = text.split(".")
    if parts[0] != VERSION:
        raise _refuse(f"its version must be {VERSION}")
    if len(parts) != 4:
        raise _refuse("it must be v1.<header>.<sealed>.<signature>")
    header_bytes = _decode(parts[1], "header")
    if len(header_bytes) > MAX_HEADER_BYTES:
        raise _refuse(f"its header exceeds {MAX_HEADER_BYTES} bytes")
    try:
        header = json.loads(header_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _refuse("its header is not JSON") from None
    if not isinstance(header, dict) or header.get("v") != VERSION:
        raise _refuse(f"its header must be a JSON object with \"v\": \"{VERSION}\"")
    mid, rkid, skid, ts = header.get("mid"), header.get("rkid"), header.get("skid"), header.get("ts")
    if not isinstance(mid, str) or not _MID.fullmatch(mid):
        raise _refuse("header.mid must be 16–64 characters of A-Z a-z 0-9 _ -")
    if not all(isinstance(k, str) and _KID.fullmatch(k) for k in (rkid, skid)):
        raise _refuse("header.rkid and header.skid must be key ids (16 hex characters)")
    if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
        raise _refuse("header.ts must be an integer (Unix seconds)")
    sender_type, sender_id = _party(header.get("from"), "from")
    recipient_type, recipient_id = _party(header.get("to"), "to")
    if len(_decode(parts[2], "sealed")) < MIN_SEALED_BYTES:
        raise _refuse("its sealed part is too short")
    if len(_decode(parts[3], "signature")) != SIGNATURE_BYTES:
        raise _refuse(f"its signature must be {SIGNATURE_BYTES} bytes")
    return OuterShape(message_id=mid, sender_type=sender_type, sender_id=sender_id, recipient_type=recipient_type,
                      recipient_id=recipient_id, rkid=rkid, skid=skid, size_bytes=len(text))
