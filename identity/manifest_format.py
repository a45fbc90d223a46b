"""A capability manifest, version v1, as the platform checks it (docs/manifests.md).

A manifest is an A2A v1.0 `AgentCard` (proto3 JSON) carrying the `urn:agents:manifest:v1`
extension and `signatures` (JWS, EdDSA) by one of the agent's registered Ed25519 signing
keys over the canonical card (RFC 8785 JCS of the card without `signatures` and empty values:
A2A's card-signing rule, checked here by `a2a-sdk`'s own verifier). `manifest_check` refuses,
in this order, each with 400 `manifest_invalid` naming the `field` and the `reason`:

1. `schema` — not a JSON object; a field A2A's `AgentCard` does not have, or of the wrong type
   (protobuf's JSON parser); a REQUIRED field missing (`name`, `description`,
   `supportedInterfaces`, `version`, `capabilities`, `defaultInputModes`, `defaultOutputModes`,
   `skills`); JSON that is not the card's proto3 form (what a verifier would sign differs from
   what was sent, e.g. `"required": false`, which proto3 JSON leaves out);
2. `bad_extension` / `unknown_extension_version` — not exactly one `urn:agents:manifest:<v>`
   extension, a version other than `v1`, `params.envelopeVersion` other than "v1", transports
   not a non-empty list of "webhook"/"websocket";
3. `unsigned` — no `signatures`; `bad_signature` — none verifies (only `alg` EdDSA, only a
   `kid` of the agent's current or in-grace signing keys).

And 413 over `AGENTS_MANIFEST_MAX_BYTES` (64 KiB). No I/O: the caller passes the agent's keys.
"""

from __future__ import annotations

import json
import re

import jwt
from django.conf import settings
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError

from a2a.types import a2a_pb2
from a2a.utils.proto_utils import validate_proto_required_fields
from a2a.utils.errors import InvalidParamsError
from a2a.utils.signing import SignatureVerificationError, create_signature_verifier
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agents_site.errors import ApiError, PayloadTooLarge
from agents_site.vocabulary import ErrorCode

EXTENSION_PREFIX = "urn:agents:manifest:"
VERSION = "v1"
EXTENSION_URI = EXTENSION_PREFIX + VERSION
ENVELOPE_VERSION = "v1"
TRANSPORTS = ("webhook", "websocket")
ALGORITHMS = ["EdDSA"]
REASONS = {
    "schema": "the manifest is not an A2A agent card",
    "unknown_extension_version": "the manifest extension's version is not one this platform knows",
    "bad_extension": "the manifest extension's params are wrong",
    "unsigned": "the manifest carries no signature",
    "bad_signature": "no signature of the manifest verifies with a signing key of the agent",
}


class ManifestInvalid(ApiError):
    """400: a capability manifest the platform refuses; `reason` (a key of `REASONS`) and `field` (its JSON path).

    Body: `{"status": 400, "code": "manifest_invalid", "error": …, "reason": "bad_signature", "field": "signatures"}`.
    """

    status = 400
    code = ErrorCode.MANIFEST_INVALID

    def __init__(self, reason: str, field: str, detail: str = "") -> None:
        super().__init__(f"{REASONS[reason]}: {field}" + (f" ({detail[:200]})" if detail else ""), reason=reason, field=field)


def max_manifest_bytes() -> int:
    """Return `AGENTS_MANIFEST_MAX_BYTES` (default 65536): the largest manifest accepted, as compact JSON."""
    return int(getattr(settings, "AGENTS_MANIFEST_MAX_BYTES", 64 * 1024))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _parse_field(error: ParseError) -> str:
    """Return the JSON path protobuf's parser names in `error` (best effort: the deepest field it mentions)."""
    text = str(error)
    located = re.search(r" at AgentCard\.([\w.\[\]]+?)\.?$", text.split("\n")[0])
    if located:
        return ".".join(_camel(p) for p in located.group(1).split("."))
    unknown = re.search(r'has no field named "([^"]+)"', text)
    path = re.findall(r"Failed to parse (\w+) field", text)
    if unknown:
        path.append(unknown.group(1))
    return ".".join(_camel(p) for p in path) or "manifest"


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


def _first_difference(sent, parsed, path: str = "") -> str:
    """Return the first JSON path where `sent` and `parsed` differ ("" when equal; numbers by value)."""
    if isinstance(sent, dict) and isinstance(parsed, dict):
        for key in sorted(set(sent) | set(parsed)):
            where = _first_difference(sent.get(key), parsed.get(key), f"{path}.{key}" if path else key)
            if where:
                return where
        return ""
    if isinstance(sent, list) and isinstance(parsed, list) and len(sent) == len(parsed):
        for index, (a, b) in enumerate(zip(sent, parsed, strict=True)):
            where = _first_difference(a, b, f"{path}[{index}]")
            if where:
                return where
        return ""
    if type(sent) is not type(parsed) and not (isinstance(sent, (int, float)) and isinstance(parsed, (int, float))
                                                and not isinstance(sent, bool) and not isinstance(parsed, bool)):
        return path or "manifest"
    return "" if sent == parsed else (path or "manifest")


def _check_extension(card: a2a_pb2.AgentCard) -> None:
    ours = [(i, e) for i, e in enumerate(card.capabilities.extensions) if e.uri.startswith(EXTENSION_PREFIX)]
    if len(ours) != 1:
        raise ManifestInvalid("bad_extension", "capabilities.extensions", f"exactly one {EXTENSION_PREFIX}<version> extension")
    index, extension = ours[0]
    where = f"capabilities.extensions[{index}]"
    if extension.uri != EXTENSION_URI:
        raise ManifestInvalid("unknown_extension_version", f"{where}.uri", extension.uri[:80])
    if not extension.HasField("params"):
        raise ManifestInvalid("bad_extension", f"{where}.params", "an object")
    params = MessageToDict(extension.params)
    if params.get("envelopeVersion") != ENVELOPE_VERSION:
        raise ManifestInvalid("bad_extension", f"{where}.params.envelopeVersion", f"must be {ENVELOPE_VERSION!r}")
    transports = params.get("transports")
    if (not isinstance(transports, list) or not transports or any(t not in TRANSPORTS for t in transports)
            or len(set(transports)) != len(transports)):
        raise ManifestInvalid("bad_extension", f"{where}.params.transports", f"a non-empty list of {', '.join(TRANSPORTS)}")


def manifest_check(value: object, *, signing_keys: dict[str, Ed25519PublicKey]) -> tuple[a2a_pb2.AgentCard, str]:
    """Check manifest `value` (see the module text); return `(card, kid)`: the parsed card and the key id that verified.

    `signing_keys` maps the key ids of the agent's current and in-grace Ed25519 signing keys to
    the keys. Raises `ManifestInvalid` (400) or `PayloadTooLarge` (413).
    Example: the vector `changed_after_signing` → `ManifestInvalid(reason="bad_signature", field="signatures")`.
    """
    if not isinstance(value, dict):
        raise ManifestInvalid("schema", "manifest", "a JSON object (an A2A agent card)")
    size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())
    if size > max_manifest_bytes():
        raise PayloadTooLarge(f"the manifest exceeds {max_manifest_bytes()} bytes", limit=max_manifest_bytes())
    try:
        card = ParseDict(value, a2a_pb2.AgentCard())
    except ParseError as exc:
        raise ManifestInvalid("schema", _parse_field(exc), str(exc).split("\n")[0]) from None
    except (RecursionError, ValueError, TypeError) as exc:
        raise ManifestInvalid("schema", "manifest", str(exc)) from None
    try:
        validate_proto_required_fields(card)
    except InvalidParamsError as exc:
        missing = (exc.data or {}).get("errors") or [{"field": "manifest", "message": "required"}]
        raise ManifestInvalid("schema", ".".join(_camel(p) for p in str(missing[0]["field"]).split(".")), missing[0]["message"]) from None
    sent = _without_empties({k: v for k, v in value.items() if k != "signatures"})
    parsed = _without_empties({k: v for k, v in MessageToDict(card).items() if k != "signatures"})
    difference = _first_difference(sent, parsed)
    if difference:
        raise ManifestInvalid("schema", difference, "not the card's proto3 JSON form: a verifier would sign other bytes")
    _check_extension(card)
    if not card.signatures:
        raise ManifestInvalid("unsigned", "signatures")
    asked: list[str] = []

    def key_of(kid, _jku):
        if kid not in signing_keys:
            raise jwt.exceptions.InvalidKeyError(f"unknown key id {kid!r}")
        asked.append(kid)
        return signing_keys[kid]

    try:
        create_signature_verifier(key_of, ALGORITHMS)(card)
    except SignatureVerificationError:
        raise ManifestInvalid("bad_signature", "signatures") from None
    return card, asked[-1]
