"""Envelopes v1 (docs/envelopes.md): seal, sign, open and verify identity messages.

An envelope is one ASCII string of four dot-separated parts:

    v1.<header>.<sealed>.<signature>

* `header` — base64url (no padding) of a UTF-8 JSON object: `v` ("v1"), `mid` (message id,
  16–64 of `[A-Za-z0-9_-]`), `from` and `to` (`{"type": "user"|"agent", "id": …}`), `rkid`
  (key id of the recipient's X25519 key), `skid` (key id of the sender's Ed25519 key), `ts`
  (integer Unix seconds when sealed).
* `sealed` — base64url of `enc ‖ ciphertext`: HPKE (RFC 9180) base mode, single shot,
  DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / AES-128-GCM, to the recipient's X25519 key, with
  `info = "agents-envelope-v1" ‖ 0x00 ‖ <header part, as sent>` and no AAD. The header — hence
  sender, recipient, key ids, message id and time — is bound into the key schedule: an
  envelope whose header was changed, or whose ciphertext was moved under another header, does
  not open.
* `signature` — base64url of the sender's Ed25519 signature over the ASCII bytes
  `v1.<header>.<sealed>`.

The plaintext is a UTF-8 JSON object, `{"type": "text", "text": "…"}` (optionally
`"reply_to": <mid>`). A key id is the first 8 bytes of SHA-256 of the raw 32-byte public key,
as 16 lowercase hex characters.

Uses `cryptography`'s HPKE (`hazmat.primitives.hpke`), Ed25519 and X25519 only: no primitive
is implemented here.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hpke, serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

VERSION = "v1"
INFO_PREFIX = b"agents-envelope-v1\x00"
SUITE = hpke.Suite(hpke.KEM.X25519, hpke.KDF.HKDF_SHA256, hpke.AEAD.AES_128_GCM)
ENC_BYTES = 32
TAG_BYTES = 16
MAX_HEADER_BYTES = 2048
PARTY_TYPES = ("user", "agent")
MID_RE = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
KID_RE = re.compile(r"^[0-9a-f]{16}$")
_B64U_RE = re.compile(r"^[A-Za-z0-9_-]*$")

#: Why an envelope was refused (`EnvelopeError.code`), each with the sentence shown to people.
REASONS = {
    "malformed": "the envelope is not a well-formed v1 envelope",
    "unsupported_version": "the envelope's version is not v1",
    "not_addressed_to_you": "the envelope is addressed to someone else",
    "sender_mismatch": "the envelope names a different sender than the one that delivered it",
    "unknown_key": "the envelope was sealed to a key this receiver does not hold",
    "unknown_signer": "the envelope was signed with a key the sender never registered",
    "signer_key_revoked": "the envelope was signed with a key the sender revoked",
    "bad_signature": "the signature does not verify: the envelope was altered or not signed by its sender",
    "cannot_decrypt": "the envelope does not open: its ciphertext or header was altered, or it was sealed for another recipient",
    "replayed": "the envelope was already received once (replay)",
    "stale": "the envelope is older than the replay window, or dated in the future",
}


class EnvelopeError(Exception):
    """An envelope was refused. `code` is a key of `REASONS`; `str()` says why in one sentence."""

    def __init__(self, code: str, detail: str = "") -> None:
        self.code = code
        self.detail = detail
        super().__init__(REASONS[code] + (f" ({detail})" if detail else ""))


def b64u(data: bytes) -> str:
    """Return base64url of `data` without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64u(text: str) -> bytes:
    """Decode base64url with or without padding; `EnvelopeError("malformed")` if it is not."""
    if not _B64U_RE.fullmatch(text):
        raise EnvelopeError("malformed", "not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise EnvelopeError("malformed", "not base64url") from exc


def raw_public(key: X25519PublicKey | Ed25519PublicKey | X25519PrivateKey | Ed25519PrivateKey) -> bytes:
    """Return the raw 32 bytes of a public key (or of a private key's public half)."""
    if isinstance(key, (X25519PrivateKey, Ed25519PrivateKey)):
        key = key.public_key()
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def kid(key: bytes | X25519PublicKey | Ed25519PublicKey | X25519PrivateKey | Ed25519PrivateKey) -> str:
    """Return the key id of a public key: hex of the first 8 bytes of SHA-256(raw key).

    Example: `kid(bytes(32))` → `"66687aadf862bd77"`.
    """
    raw = key if isinstance(key, (bytes, bytearray)) else raw_public(key)
    return hashlib.sha256(bytes(raw)).hexdigest()[:16]


@dataclass(frozen=True)
class Party:
    """One end of an envelope: `type` "user" or "agent", and its id on the platform."""

    type: str
    id: str

    def as_json(self) -> dict:
        return {"type": self.type, "id": self.id}

    def __str__(self) -> str:
        return f"{self.type}:{self.id}"


@dataclass(frozen=True)
class Header:
    """The parsed, not yet verified, outer header of an envelope."""

    mid: str
    sender: Party
    recipient: Party
    rkid: str
    skid: str
    ts: int


@dataclass(frozen=True)
class Parsed:
    """An envelope split into its parts (`header_part` etc. exactly as sent)."""

    header: Header
    header_part: str
    sealed_part: str
    signature_part: str

    @property
    def signing_input(self) -> bytes:
        return f"{VERSION}.{self.header_part}.{self.sealed_part}".encode("ascii")


@dataclass(frozen=True)
class SignerKey:
    """A sender's Ed25519 public key and its state: "current", "grace" (old, still valid) or "revoked"."""

    public_key: Ed25519PublicKey
    status: str = "current"

    @property
    def kid(self) -> str:
        return kid(self.public_key)


@dataclass(frozen=True)
class Opened:
    """An opened, verified envelope: who sent it, to whom, the body, and the key that signed it."""

    mid: str
    sender: Party
    recipient: Party
    ts: int
    body: dict
    signer_kid: str
    recipient_kid: str

    @property
    def text(self) -> str:
        """The `text` of a text message ("" when the body has none)."""
        value = self.body.get("text")
        return value if isinstance(value, str) else ""


def _json_object(raw: bytes, what: str) -> dict:
    """Decode `raw` as a UTF-8 JSON object; `EnvelopeError("malformed")` naming `what` otherwise."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise EnvelopeError("malformed", f"the {what} is not JSON") from exc
    if not isinstance(data, dict):
        raise EnvelopeError("malformed", f"the {what} is not a JSON object")
    return data


def _party(value: object, where: str) -> Party:
    if not isinstance(value, dict) or value.get("type") not in PARTY_TYPES or not isinstance(value.get("id"), str) or not value["id"]:
        raise EnvelopeError("malformed", f"`{where}` must be {{type: user|agent, id}}")
    if len(value["id"]) > 300:
        raise EnvelopeError("malformed", f"`{where}.id` is too long")
    return Party(value["type"], value["id"])


def parse(envelope: object) -> Parsed:
    """Split and check the outer shape of `envelope` (nothing is verified or decrypted).

    Raises `EnvelopeError` `unsupported_version` (not "v1.…") or `malformed` (anything else:
    part count, base64url, header JSON, field types, sizes).
    """
    if not isinstance(envelope, str) or not envelope:
        raise EnvelopeError("malformed", "an envelope is a string")
    parts = envelope.split(".")
    if parts[0] != VERSION:
        raise EnvelopeError("unsupported_version", f"got {parts[0][:16]!r}")
    if len(parts) != 4:
        raise EnvelopeError("malformed", "expected v1.<header>.<sealed>.<signature>")
    _, header_part, sealed_part, signature_part = parts
    header_bytes = unb64u(header_part)
    if len(header_bytes) > MAX_HEADER_BYTES:
        raise EnvelopeError("malformed", f"the header exceeds {MAX_HEADER_BYTES} bytes")
    data = _json_object(header_bytes, "header")
    if data.get("v") != VERSION:
        raise EnvelopeError("unsupported_version", f"header v = {str(data.get('v'))[:16]!r}")
    mid, rkid, skid, ts = data.get("mid"), data.get("rkid"), data.get("skid"), data.get("ts")
    if not isinstance(mid, str) or not MID_RE.fullmatch(mid):
        raise EnvelopeError("malformed", "`mid` must be 16–64 characters of A-Z a-z 0-9 _ -")
    for name, value in (("rkid", rkid), ("skid", skid)):
        if not isinstance(value, str) or not KID_RE.fullmatch(value):
            raise EnvelopeError("malformed", f"`{name}` must be a key id (16 hex characters)")
    if not isinstance(ts, int) or isinstance(ts, bool) or ts < 0:
        raise EnvelopeError("malformed", "`ts` must be an integer (Unix seconds)")
    header = Header(mid=mid, sender=_party(data.get("from"), "from"), recipient=_party(data.get("to"), "to"), rkid=rkid, skid=skid, ts=ts)
    if len(unb64u(sealed_part)) < ENC_BYTES + TAG_BYTES:
        raise EnvelopeError("malformed", "the sealed part is too short")
    if len(unb64u(signature_part)) != 64:
        raise EnvelopeError("malformed", "the signature must be 64 bytes")
    return Parsed(header=header, header_part=header_part, sealed_part=sealed_part, signature_part=signature_part)


def new_mid() -> str:
    """Return a fresh random message id (22 base64url characters, 128 bits)."""
    return b64u(secrets.token_bytes(16))


def info_for(header_part: str) -> bytes:
    """Return the HPKE `info` of an envelope whose header part is `header_part`."""
    return INFO_PREFIX + header_part.encode("ascii")


def seal(
    *,
    body: Mapping,
    sender: Party,
    recipient: Party,
    recipient_key: X25519PublicKey | bytes,
    signing_key: Ed25519PrivateKey,
    mid: str | None = None,
    ts: int | None = None,
) -> str:
    """Seal `body` (a JSON object) from `sender` to `recipient`'s X25519 key and sign it; return the envelope.

    `recipient_key`: the recipient's registered X25519 public key (raw 32 bytes or a key
    object). `signing_key`: the sender's Ed25519 private key (its public half must be the one
    the sender registered). `mid` defaults to a fresh random id, `ts` to now.
    """
    if isinstance(recipient_key, (bytes, bytearray)):
        recipient_key = X25519PublicKey.from_public_bytes(bytes(recipient_key))
    header = {
        "v": VERSION,
        "mid": mid or new_mid(),
        "from": sender.as_json(),
        "to": recipient.as_json(),
        "rkid": kid(recipient_key),
        "skid": kid(signing_key),
        "ts": int(time.time()) if ts is None else int(ts),
    }
    header_part = b64u(json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))
    plaintext = json.dumps(dict(body), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    sealed_part = b64u(SUITE.encrypt(plaintext, recipient_key, info=info_for(header_part)))
    signature = signing_key.sign(f"{VERSION}.{header_part}.{sealed_part}".encode("ascii"))
    return f"{VERSION}.{header_part}.{sealed_part}.{b64u(signature)}"


class ReplayWindow:
    """The message ids a receiver has seen, per sender, for `max_age` seconds (thread-safe).

    `check` refuses an envelope seen before (`replayed`) or dated outside the window (`stale`:
    older than `max_age`, or more than `max_skew` seconds in the future); `remember` records
    it once it opened. At most `max_ids` ids are kept (oldest dropped first). Default window:
    7 days, the key grace period (an envelope that waited for an offline agent still opens).
    """

    def __init__(self, *, max_age: int = 7 * 24 * 3600, max_skew: int = 300, max_ids: int = 100_000) -> None:
        self.max_age, self.max_skew, self.max_ids = max_age, max_skew, max_ids
        self._seen: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._lock = threading.Lock()

    def check(self, header: Header, *, now: float | None = None) -> None:
        """Raise `EnvelopeError` `stale` or `replayed` for `header`; return None when it is new."""
        now = time.time() if now is None else now
        if header.ts < now - self.max_age or header.ts > now + self.max_skew:
            raise EnvelopeError("stale", f"sealed at {header.ts}")
        with self._lock:
            if (str(header.sender), header.mid) in self._seen:
                raise EnvelopeError("replayed", f"message id {header.mid}")

    def remember(self, header: Header, *, now: float | None = None) -> None:
        """Record `header`'s (sender, mid); drop ids older than the window or beyond `max_ids`."""
        now = time.time() if now is None else now
        with self._lock:
            self._seen[(str(header.sender), header.mid)] = header.ts
            while self._seen and (len(self._seen) > self.max_ids or next(iter(self._seen.values())) < now - self.max_age):
                self._seen.popitem(last=False)

    def seen(self, sender: Party, mid: str) -> bool:
        with self._lock:
            return (str(sender), mid) in self._seen


SignerLookup = Callable[[Party, str], "SignerKey | None"]


@dataclass
class Receiver:
    """What a receiver needs to open envelopes: who it is, its private keys, the senders' keys.

    `private_keys`: its X25519 private keys (the current one and any still in grace), by kid
    or as a list. `signer`: a function `(sender, skid) → SignerKey | None` answering the
    sender's registered Ed25519 key of that id (None: never registered). `replay`: the window
    of seen ids (one per receiver, kept across calls).
    """

    me: Party
    private_keys: Mapping[str, X25519PrivateKey] | Iterable[X25519PrivateKey]
    signer: SignerLookup
    replay: ReplayWindow = field(default_factory=ReplayWindow)

    def __post_init__(self) -> None:
        if not isinstance(self.private_keys, Mapping):
            self.private_keys = {kid(k): k for k in self.private_keys}

    def open(self, envelope: object, *, sender: Party | None = None, now: float | None = None) -> Opened:
        """Open and verify `envelope`; return what it holds or raise `EnvelopeError` (see module doc).

        `sender`: who the platform says delivered it (a webhook's `user_id`, an inbox item's
        agent); the header must name the same party. Order of checks: shape, recipient,
        sender, recipient key, signer key, signature, replay window, decryption, body.
        """
        return open_envelope(envelope, receiver=self, sender=sender, now=now)


def open_envelope(envelope: object, *, receiver: Receiver, sender: Party | None = None, now: float | None = None) -> Opened:
    """Open and verify `envelope` for `receiver` (see `Receiver.open`)."""
    parsed = parse(envelope)
    header = parsed.header
    if header.recipient != receiver.me:
        raise EnvelopeError("not_addressed_to_you", f"addressed to {header.recipient}")
    if sender is not None and header.sender != sender:
        raise EnvelopeError("sender_mismatch", f"header says {header.sender}, delivered by {sender}")
    private_key = receiver.private_keys.get(header.rkid)
    if private_key is None:
        raise EnvelopeError("unknown_key", f"key id {header.rkid}")
    signer = receiver.signer(header.sender, header.skid)
    if signer is None or signer.kid != header.skid:
        raise EnvelopeError("unknown_signer", f"key id {header.skid} of {header.sender}")
    if signer.status == "revoked":
        raise EnvelopeError("signer_key_revoked", f"key id {header.skid} of {header.sender}")
    try:
        signer.public_key.verify(unb64u(parsed.signature_part), parsed.signing_input)
    except InvalidSignature as exc:
        raise EnvelopeError("bad_signature") from exc
    receiver.replay.check(header, now=now)
    try:
        plaintext = SUITE.decrypt(unb64u(parsed.sealed_part), private_key, info=info_for(parsed.header_part))
    except (InvalidTag, ValueError) as exc:
        raise EnvelopeError("cannot_decrypt") from exc
    body = _json_object(plaintext, "plaintext")
    receiver.replay.remember(header, now=now)
    return Opened(mid=header.mid, sender=header.sender, recipient=header.recipient, ts=header.ts, body=body,
                  signer_kid=header.skid, recipient_kid=header.rkid)


def text_body(text: str, *, reply_to: str | None = None) -> dict:
    """Return the plaintext body of a text message (`reply_to`: the mid it answers)."""
    body = {"type": "text", "text": text}
    if reply_to:
        body["reply_to"] = reply_to
    return body
