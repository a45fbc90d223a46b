"""Write docs/manifests-v1-vectors.json: the capability manifests every v1 implementation must accept or refuse.

Run once when the format changes (`.venv/bin/python scripts/make_manifest_vectors.py`); the file
is the contract, committed, and read by the server's tests, `sdk/python` and `sdk/typescript`.
The keys are fixed (derived from their names: TEST KEYS, never use them) and Ed25519 signs
deterministically, so a rerun writes the same file.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sdk" / "python"))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

from agents_identity.envelope import b64u, kid, raw_public  # noqa: E402
from agents_identity.keys import jwk_of  # noqa: E402
from agents_identity.manifest import EXTENSION_PREFIX, build_manifest, canonical, sign_manifest  # noqa: E402

OUT = ROOT / "docs" / "manifests-v1-vectors.json"
MESSAGES_URL = "https://agents.example/v1/identity/agents/agent_0123456789abcdef0123456789abcdef/messages"


def e_key(label: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(hashlib.sha256(f"agents-manifest-v1 test key ed25519 {label}".encode()).digest())


AGENT = e_key("echo")
OTHER = e_key("other")


def key_entry(key: Ed25519PrivateKey) -> dict:
    return {"kid": kid(key), "signing_public_key": base64.b64encode(raw_public(key)).decode(), "ed25519_private_jwk": jwk_of(key)}


def minimal() -> dict:
    return build_manifest(name="echo_bot", description="Echoes what you send", transports=["webhook"], messages_url=MESSAGES_URL)


def rich() -> dict:
    card = build_manifest(name="translator", description="Traduit — 翻訳 — переводит 🌍", transports=["websocket", "webhook"],
                          messages_url=MESSAGES_URL, version="2.1.0", provider={"organization": "Acme", "url": "https://acme.example"},
                          skills=[{"id": "translate", "name": "translate", "description": "Translate text", "tags": ["language"],
                                   "examples": ["Translate 'bonjour' to English"]}])
    params = card["capabilities"]["extensions"][0]["params"]
    params.update({"maxEnvelopeBytes": 262144, "replyWithinSeconds": 1.5, "languages": ["fr", "ja", "ru"], "notes": ""})
    return card


def extension(card: dict) -> dict:
    return card["capabilities"]["extensions"][0]


def hs256(card: dict) -> dict:
    """A signature whose header claims HS256 (keyed with the public key's bytes): verifiers must refuse any alg but EdDSA."""
    import hmac

    protected = b64u(json.dumps({"alg": "HS256", "kid": kid(AGENT), "typ": "JOSE"}, separators=(",", ":")).encode())
    mac = hmac.new(raw_public(AGENT), f"{protected}.{b64u(canonical(card))}".encode(), "sha256").digest()
    return {**card, "signatures": [{"protected": protected, "signature": b64u(mac)}]}


def main() -> None:
    valid = [
        {"name": "minimal_webhook_agent", "manifest": sign_manifest(minimal(), AGENT), "kid": kid(AGENT)},
        {"name": "unicode_numbers_and_empties", "manifest": sign_manifest(rich(), AGENT), "kid": kid(AGENT),
         "why": "Unicode text, integer and fractional numbers, an empty string left out of the canonical form"},
        {"name": "second_signature_verifies", "manifest": sign_manifest(sign_manifest(minimal(), OTHER), AGENT), "kid": kid(AGENT),
         "why": "a signature by a key the agent never registered comes first; the agent's own verifies"},
    ]
    for vector in valid:
        vector["canonical"] = canonical(vector["manifest"]).decode("utf-8")

    tampered = sign_manifest(minimal(), AGENT)
    tampered["description"] = "Echoes what you send, and more"
    v2 = minimal()
    extension(v2)["uri"] = EXTENSION_PREFIX + "v2"
    old_envelopes = minimal()
    extension(old_envelopes)["params"]["envelopeVersion"] = "v0"
    carrier = minimal()
    extension(carrier)["params"]["transports"] = ["carrier-pigeon"]
    nameless = copy.deepcopy(sign_manifest(minimal(), AGENT))
    nameless["name"] = ""

    def signed_raw(card: dict) -> dict:  # signed without the builder's checks: the refusal must come from the verifier
        return _force_sign(card, AGENT)

    invalid = [
        {"name": "changed_after_signing", "manifest": tampered, "reason": "bad_signature", "field": "signatures"},
        {"name": "signed_by_an_unregistered_key", "manifest": sign_manifest(minimal(), OTHER), "reason": "bad_signature", "field": "signatures"},
        {"name": "unsigned", "manifest": minimal(), "reason": "unsigned", "field": "signatures"},
        {"name": "hs256_instead_of_eddsa", "manifest": hs256(minimal()), "reason": "bad_signature", "field": "signatures"},
        {"name": "unknown_extension_version", "manifest": signed_raw(v2), "reason": "unknown_extension_version",
         "field": "capabilities.extensions[0].uri"},
        {"name": "unknown_envelope_version", "manifest": signed_raw(old_envelopes), "reason": "bad_extension",
         "field": "capabilities.extensions[0].params.envelopeVersion"},
        {"name": "unknown_transport", "manifest": signed_raw(carrier), "reason": "bad_extension",
         "field": "capabilities.extensions[0].params.transports"},
        {"name": "no_name", "manifest": nameless, "reason": "schema", "field": "name"},
    ]
    vectors = {
        "format": "agents-manifest v1 (docs/manifests.md)",
        "warning": "TEST KEYS: derived from public labels; never use them",
        "extension": EXTENSION_PREFIX + "v1",
        "agent_keys": [key_entry(AGENT)],
        "unregistered_keys": [key_entry(OTHER)],
        "valid": valid,
        "invalid": invalid,
    }
    OUT.write_text(json.dumps(vectors, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(valid)} valid, {len(invalid)} invalid")


def _force_sign(card: dict, key: Ed25519PrivateKey) -> dict:
    protected = b64u(json.dumps({"alg": "EdDSA", "kid": kid(key), "typ": "JOSE"}, separators=(",", ":")).encode())
    signature = key.sign(f"{protected}.{b64u(canonical(card))}".encode("ascii"))
    return {**card, "signatures": [{"protected": protected, "signature": b64u(signature)}]}


if __name__ == "__main__":
    main()
