"""Capability manifests, version `v1` (docs/manifests.md): an A2A agent card, signed.

A manifest is an A2A v1.0 `AgentCard` (its proto3 JSON form, camelCase) that carries one
extension, `urn:agents:manifest:v1`, whose `params` say how the platform reaches the agent
(`envelopeVersion`: "v1", `transports`: "webhook" and/or "websocket"), and one or more
`signatures`: JWS (RFC 7515) with a detached payload, `alg` "EdDSA" (Ed25519, RFC 8037) by a
signing key the agent registered (`kid` = its key id, docs/envelopes.md), over the **canonical
card**: the card without `signatures`, with every empty string, array and object removed
(recursively), serialized by RFC 8785 (JCS). That is A2A's own card-signing rule, so any A2A
verifier (e.g. `a2a-sdk`'s `create_signature_verifier`) checks the same signature.

    card = build_manifest(name="echo_bot", description="Echoes", transports=["webhook"])
    signed = sign_manifest(card, signing_key)            # Ed25519PrivateKey
    verify_manifest(signed, {kid(signing_key): signing_key.public_key()})  # → the kid that verified
"""

from __future__ import annotations

import base64
import copy
import json
import math
import re

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agents_identity.envelope import b64u, kid, unb64u

EXTENSION_PREFIX = "urn:agents:manifest:"
VERSION = "v1"
EXTENSION_URI = EXTENSION_PREFIX + VERSION
ENVELOPE_VERSION = "v1"
TRANSPORTS = ("webhook", "websocket")
ENVELOPE_BINDING = "AGENTS-ENVELOPE"  # the interface people reach the agent through: the platform's v1 envelopes
ALGORITHM = "EdDSA"
MAX_DEPTH = 32

#: Why a manifest is refused, and the sentence (the server answers 400 `manifest_invalid` with the same `reason`).
REASONS = {
    "schema": "the manifest is not an A2A agent card",
    "unknown_extension_version": "the manifest extension's version is not one this implementation knows",
    "bad_extension": "the manifest extension's params are wrong",
    "unsigned": "the manifest carries no signature",
    "bad_signature": "no signature of the manifest verifies with a signing key of the agent",
}


class ManifestError(Exception):
    """A refused manifest: `reason` (a key of `REASONS`) and `field`, the JSON path at fault."""

    def __init__(self, reason: str, field: str, detail: str = "") -> None:
        self.reason, self.field = reason, field
        super().__init__(f"{REASONS[reason]}: {field}" + (f" ({detail})" if detail else ""))


# -- RFC 8785 (JCS) --------------------------------------------------------------------------------

def _number(value) -> str:
    """Return a JSON number as ECMAScript's Number::toString writes it (RFC 8785 §3.2.2.3)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, int):
        if abs(value) > 2**53 - 1:
            raise ValueError("an integer beyond ±(2^53-1) has no interoperable JSON form")
        value = float(value)
    if not math.isfinite(value):
        raise ValueError("NaN and infinities are not JSON")
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    digits, exponent = _shortest(abs(value))
    k, n = len(digits), exponent  # value = 0.digits × 10^n, per ECMA-262 7.1.12.1
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
        text = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + text


def _shortest(value: float) -> tuple[str, int]:
    """Return (digits, n) with value = 0.d1d2… × 10^n and the fewest digits that round-trip (Python's repr)."""
    mantissa, _, exp = repr(value).lower().partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    lead = len(whole) if whole.strip("0") else -len(frac) + len(frac.lstrip("0"))
    n = lead + (int(exp) if exp else 0)
    return digits.rstrip("0") or "0", n


_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(text: str) -> str:
    return '"' + re.sub(r'[\x00-\x1f\\"]', lambda m: _ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), text) + '"'


def jcs(value, depth: int = 0) -> str:
    """Return `value` serialized by RFC 8785: keys sorted by UTF-16 code units, no whitespace, ES numbers."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH}")
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, list):
        return "[" + ",".join(jcs(v, depth + 1) for v in value) + "]"
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-16-be"))
        return "{" + ",".join(_string(k) + ":" + jcs(value[k], depth + 1) for k in keys) + "}"
    raise TypeError(f"{type(value).__name__} is not JSON")


def _without_empties(value):
    if isinstance(value, dict):
        kept = {k: c for k, v in value.items() if (c := _without_empties(v)) is not None}
        return kept or None
    if isinstance(value, list):
        kept = [c for v in value if (c := _without_empties(v)) is not None]
        return kept or None
    if isinstance(value, str) and not value:
        return None
    return value


def canonical(card: dict) -> bytes:
    """Return the bytes a manifest's signatures cover: JCS of `card` without `signatures` and empties (UTF-8)."""
    body = {k: v for k, v in card.items() if k != "signatures"}
    return jcs(_without_empties(body) or {}).encode("utf-8")


# -- build, sign, verify ---------------------------------------------------------------------------

def build_manifest(*, name: str, description: str, transports: list[str], messages_url: str, version: str = "1.0.0",
                   skills: list[dict] | None = None, provider: dict | None = None, a2a_url: str = "") -> dict:
    """Return an unsigned v1 manifest (an A2A card as JSON) for an identity agent.

    `transports` ⊆ {"webhook", "websocket"}; `messages_url` where people send the agent v1
    envelopes (`{platform}/v1/identity/agents/{agent_id}/messages`: the card's first interface,
    binding `AGENTS-ENVELOPE` version `v1`); `skills` A2A skills (`{id, name, description, tags}`;
    default one `message` skill); `a2a_url` the agent's own A2A JSON-RPC endpoint, if it has one.
    """
    card = {
        "name": name,
        "description": description,
        "version": version,
        "capabilities": {"streaming": False, "pushNotifications": False, "extensions": [
            {"uri": EXTENSION_URI, "description": "Agents platform capability manifest: reached by v1 envelopes",
             "params": {"envelopeVersion": ENVELOPE_VERSION, "transports": list(transports)}}]},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills or [{"id": "message", "name": "message", "description": description, "tags": ["message"]}],
    }
    card["supportedInterfaces"] = [{"url": messages_url, "protocolBinding": ENVELOPE_BINDING, "protocolVersion": ENVELOPE_VERSION}]
    if a2a_url:
        card["supportedInterfaces"].append({"url": a2a_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"})
    if provider:
        card["provider"] = dict(provider)
    check_manifest(card)
    return card


def sign_manifest(card: dict, signing_key: Ed25519PrivateKey) -> dict:
    """Return a copy of `card` with one more signature by `signing_key` (EdDSA; `kid` its key id)."""
    check_manifest(card)
    protected = b64u(json.dumps({"alg": ALGORITHM, "kid": kid(signing_key), "typ": "JOSE"}, separators=(",", ":")).encode())
    payload = b64u(canonical(card))
    signature = signing_key.sign(f"{protected}.{payload}".encode("ascii"))
    signed = copy.deepcopy(card)
    signed.setdefault("signatures", []).append({"protected": protected, "signature": b64u(signature)})
    return signed


def check_manifest(card: object) -> None:
    """Check a manifest's shape and its extension (not its signatures); raise `ManifestError`.

    In order: a JSON object with a non-empty `name`, `description`, `version`,
    `supportedInterfaces`, `skills` (lists) and `capabilities.extensions` (a list) → exactly one extension whose `uri` starts with
    `urn:agents:manifest:` and ends `v1` (another version: `unknown_extension_version`) →
    `params.envelopeVersion` "v1", `params.transports` a non-empty list of "webhook"/"websocket".
    """
    if not isinstance(card, dict):
        raise ManifestError("schema", "$", "a JSON object")
    for field in ("name", "description", "version"):
        if not isinstance(card.get(field), str) or not card[field].strip():
            raise ManifestError("schema", field, "a non-empty string")
    for field in ("supportedInterfaces", "skills"):
        if not isinstance(card.get(field), list) or not card[field]:
            raise ManifestError("schema", field, "a non-empty list")
    capabilities = card.get("capabilities")
    extensions = capabilities.get("extensions") if isinstance(capabilities, dict) else None
    if not isinstance(extensions, list):
        raise ManifestError("schema", "capabilities.extensions", "a list")
    ours = [(i, e) for i, e in enumerate(extensions) if isinstance(e, dict) and str(e.get("uri", "")).startswith(EXTENSION_PREFIX)]
    if len(ours) != 1:
        raise ManifestError("bad_extension", "capabilities.extensions", f"exactly one {EXTENSION_PREFIX}<version> extension")
    index, extension = ours[0]
    where = f"capabilities.extensions[{index}]"
    if extension["uri"] != EXTENSION_URI:
        raise ManifestError("unknown_extension_version", f"{where}.uri", extension["uri"][:80])
    params = extension.get("params")
    if not isinstance(params, dict):
        raise ManifestError("bad_extension", f"{where}.params", "an object")
    if params.get("envelopeVersion") != ENVELOPE_VERSION:
        raise ManifestError("bad_extension", f"{where}.params.envelopeVersion", f"must be {ENVELOPE_VERSION!r}")
    transports = params.get("transports")
    if not isinstance(transports, list) or not transports or any(t not in TRANSPORTS for t in transports) or len(set(transports)) != len(transports):
        raise ManifestError("bad_extension", f"{where}.params.transports", f"a non-empty list of {', '.join(TRANSPORTS)}")


def verify_manifest(card: object, keys: dict[str, Ed25519PublicKey]) -> str:
    """Check `card` (`check_manifest`) and its signatures; return the `kid` of the first that verifies.

    `keys` maps key ids to the agent's registered Ed25519 signing keys (current and in grace).
    A signature counts only with `alg` "EdDSA" and a `kid` in `keys`. Raises `ManifestError`:
    `unsigned` (no `signatures`), `bad_signature` (none verifies; `field` "signatures").
    """
    check_manifest(card)
    signatures = card.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        raise ManifestError("unsigned", "signatures")
    payload = b64u(canonical(card))
    for entry in signatures:
        if not isinstance(entry, dict) or not isinstance(entry.get("protected"), str) or not isinstance(entry.get("signature"), str):
            continue
        try:
            header = json.loads(unb64u(entry["protected"]))
            signature = unb64u(entry["signature"])
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(header, dict) or header.get("alg") != ALGORITHM or header.get("kid") not in keys:
            continue
        try:
            keys[header["kid"]].verify(signature, f"{entry['protected']}.{payload}".encode("ascii"))
        except InvalidSignature:
            continue
        return header["kid"]
    raise ManifestError("bad_signature", "signatures")


def public_key(b64: str) -> Ed25519PublicKey:
    """Return the Ed25519 key of a registered `signing_public_key` (standard base64 of 32 bytes)."""
    return Ed25519PublicKey.from_public_bytes(base64.b64decode(b64))
