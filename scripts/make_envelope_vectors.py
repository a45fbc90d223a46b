"""Write docs/envelopes-v1-vectors.json: the envelopes every v1 implementation must open or refuse.

Run once when the format changes (`.venv/bin/python scripts/make_envelope_vectors.py`); the file
is the contract, committed, and read by the server's tests, `sdk/python`, `sdk/typescript` and
the browser test. The keys are fixed (derived from their names: TEST KEYS, never use them); the
HPKE ephemeral keys are random, so a rerun writes other, equally valid, envelopes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "sdk" / "python"))

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey  # noqa: E402

from agents_identity.envelope import Party, b64u, kid, raw_public, seal, text_body, unb64u  # noqa: E402
from agents_identity.keys import jwk_of  # noqa: E402

NOW = 1_767_225_600  # 2026-01-01T00:00:00Z: every vector is opened "at" this time
OUT = ROOT / "docs" / "envelopes-v1-vectors.json"


def _seed(label: str) -> bytes:
    return hashlib.sha256(f"agents-envelope-v1 test key {label}".encode()).digest()


def x_key(label: str) -> X25519PrivateKey:
    return X25519PrivateKey.from_private_bytes(_seed("x25519 " + label))


def e_key(label: str) -> Ed25519PrivateKey:
    return Ed25519PrivateKey.from_private_bytes(_seed("ed25519 " + label))


PARTIES = {
    "alice": Party("user", "alice"),
    "mallory": Party("user", "mallory"),
    "echo": Party("agent", "ext_echo0000001"),
    "other": Party("agent", "ext_other000001"),
}
X = {name: x_key(name) for name in PARTIES}
E = {name: e_key(name) for name in PARTIES}
ECHO_OLD_X = x_key("echo previous")  # in grace after a normal rotation: still opens
ECHO_REVOKED_X = x_key("echo revoked")  # revoked by an emergency rotation: the agent no longer holds it
ECHO_REVOKED_E = e_key("echo revoked")  # its signing key revoked by the same emergency rotation


def party_entry(name: str) -> dict:
    entry = {"party": PARTIES[name].as_json(), "x25519_private_jwk": jwk_of(X[name]), "ed25519_private_jwk": jwk_of(E[name]),
             "kid": kid(X[name]), "skid": kid(E[name]), "previous_x25519_private_jwks": []}
    if name == "echo":
        entry["previous_x25519_private_jwks"] = [jwk_of(ECHO_OLD_X)]
    return entry


def signer(name: str, key: Ed25519PrivateKey, status: str) -> dict:
    return {"party": PARTIES[name].as_json(), "kid": kid(key), "public_key": base64.b64encode(raw_public(key)).decode(), "status": status}


def mid(label: str) -> str:
    return b64u(hashlib.sha256(label.encode()).digest()[:16])


def env(sender: str, recipient: str, text: str, *, to_key=None, signing=None, label: str, ts: int = NOW - 60, reply_to=None) -> str:
    return seal(body=text_body(text, reply_to=reply_to), sender=PARTIES[sender], recipient=PARTIES[recipient],
                recipient_key=(to_key or X[recipient]).public_key(), signing_key=signing or E[sender], mid=mid(label), ts=ts)


def split(envelope: str) -> list[str]:
    return envelope.split(".")


def resign(parts: list[str], key: Ed25519PrivateKey) -> str:
    signature = key.sign(".".join(parts[:3]).encode("ascii"))
    return ".".join(parts[:3] + [b64u(signature)])


def flip(part: str, index: int = -5) -> str:
    raw = bytearray(unb64u(part))
    raw[index] ^= 0x01
    return b64u(bytes(raw))


def header_with(parts: list[str], **changes) -> str:
    data = json.loads(unb64u(parts[1]))
    data.update(changes)
    return b64u(json.dumps(data, separators=(",", ":")).encode())


def main() -> None:
    hello = env("alice", "echo", "hello", label="hello")
    opens = [
        {"name": "user_to_agent_text", "receiver": "echo", "sender": PARTIES["alice"].as_json(), "envelope": hello,
         "expect": {"mid": mid("hello"), "body": text_body("hello"), "signer_kid": kid(E["alice"]), "recipient_kid": kid(X["echo"])}},
        {"name": "agent_to_user_reply", "receiver": "alice", "sender": PARTIES["echo"].as_json(),
         "envelope": env("echo", "alice", "echo: hello", label="reply", reply_to=mid("hello")),
         "expect": {"mid": mid("reply"), "body": text_body("echo: hello", reply_to=mid("hello")), "signer_kid": kid(E["echo"]), "recipient_kid": kid(X["alice"])}},
        {"name": "sealed_to_the_key_in_grace", "receiver": "echo", "sender": PARTIES["alice"].as_json(),
         "envelope": env("alice", "echo", "still opens after a normal rotation", to_key=ECHO_OLD_X, label="grace"),
         "expect": {"mid": mid("grace"), "body": text_body("still opens after a normal rotation"), "signer_kid": kid(E["alice"]), "recipient_kid": kid(ECHO_OLD_X)}},
        {"name": "unicode_text", "receiver": "echo", "sender": PARTIES["alice"].as_json(),
         "envelope": env("alice", "echo", "héllo 🌍 — 你好", label="unicode"),
         "expect": {"mid": mid("unicode"), "body": text_body("héllo 🌍 — 你好"), "signer_kid": kid(E["alice"]), "recipient_kid": kid(X["echo"])}},
    ]
    h = split(hello)
    tampered = h[:2] + [flip(h[2])]
    readdressed = split(env("alice", "echo", "meant for echo", label="readdressed"))
    readdressed_parts = ["v1", header_with(readdressed, to=PARTIES["other"].as_json(), rkid=kid(X["other"])), readdressed[2]]
    rewrap_header = header_with(h, **{"from": PARTIES["mallory"].as_json(), "skid": kid(E["mallory"]), "mid": mid("rewrapped")})
    refuse = [
        {"name": "tampered_ciphertext", "receiver": "echo", "sender": PARTIES["alice"].as_json(), "envelope": resign(tampered, E["alice"]),
         "error": "cannot_decrypt", "why": "one bit of the ciphertext flipped, signed again by the sender: the AEAD refuses it"},
        {"name": "tampered_ciphertext_unsigned", "receiver": "echo", "sender": PARTIES["alice"].as_json(), "envelope": ".".join(tampered + [h[3]]),
         "error": "bad_signature", "why": "one bit of the ciphertext flipped in transit: the signature no longer verifies"},
        {"name": "tampered_header", "receiver": "echo", "sender": PARTIES["alice"].as_json(),
         "envelope": ".".join(["v1", header_with(h, ts=NOW - 30), h[2], h[3]]), "error": "bad_signature",
         "why": "the header's time changed in transit"},
        {"name": "wrong_signature", "receiver": "echo", "sender": PARTIES["alice"].as_json(), "envelope": resign(h, E["mallory"]),
         "error": "bad_signature", "why": "signed by another key than the one skid names"},
        {"name": "readdressed_to_another_agent", "receiver": "other", "sender": PARTIES["alice"].as_json(),
         "envelope": resign(readdressed_parts, E["alice"]), "error": "cannot_decrypt",
         "why": "a header naming agent 'other' (and its key) over a ciphertext sealed to 'echo': the HPKE info no longer matches"},
        {"name": "delivered_to_another_agent", "receiver": "other", "sender": PARTIES["alice"].as_json(), "envelope": hello,
         "error": "not_addressed_to_you", "why": "the envelope to 'echo' handed to 'other' as it is"},
        {"name": "ciphertext_rewrapped_by_another_sender", "receiver": "echo", "sender": PARTIES["mallory"].as_json(),
         "envelope": resign(["v1", rewrap_header, h[2]], E["mallory"]), "error": "cannot_decrypt",
         "why": "mallory lifts alice's ciphertext into an envelope of her own, validly signed: the header is bound into the key schedule"},
        {"name": "sealed_to_a_revoked_key", "receiver": "echo", "sender": PARTIES["alice"].as_json(),
         "envelope": env("alice", "echo", "to the revoked key", to_key=ECHO_REVOKED_X, label="revoked-x"), "error": "unknown_key",
         "why": "sealed to a key the agent dropped after an emergency rotation"},
        {"name": "signed_with_a_revoked_key", "receiver": "alice", "sender": PARTIES["echo"].as_json(),
         "envelope": env("echo", "alice", "signed with the revoked key", signing=ECHO_REVOKED_E, label="revoked-e"), "error": "signer_key_revoked",
         "why": "signed with the agent's signing key that an emergency rotation revoked"},
        {"name": "sender_mismatch", "receiver": "echo", "sender": PARTIES["mallory"].as_json(), "envelope": hello, "error": "sender_mismatch",
         "why": "delivered as mallory's while its header names alice"},
        {"name": "unsupported_version", "receiver": "echo", "sender": PARTIES["alice"].as_json(), "envelope": "v2." + ".".join(h[1:]),
         "error": "unsupported_version", "why": "another version"},
        {"name": "malformed", "receiver": "echo", "sender": PARTIES["alice"].as_json(), "envelope": ".".join(h[:3]), "error": "malformed",
         "why": "three parts"},
        {"name": "stale", "receiver": "echo", "sender": PARTIES["alice"].as_json(),
         "envelope": env("alice", "echo", "eight days old", label="stale", ts=NOW - 8 * 24 * 3600), "error": "stale",
         "why": "sealed before the 7-day replay window"},
    ]
    signers = [signer(n, E[n], "current") for n in PARTIES] + [signer("echo", ECHO_REVOKED_E, "revoked")]
    vectors = {
        "format": "agents-envelope v1 (docs/envelopes.md)",
        "warning": "TEST KEYS: derived from public labels; never use them",
        "suite": {"kem": "DHKEM(X25519, HKDF-SHA256) 0x0020", "kdf": "HKDF-SHA256 0x0001", "aead": "AES-128-GCM 0x0001", "mode": "base 0x00"},
        "now": NOW,
        "replay_window_seconds": 7 * 24 * 3600,
        "parties": {name: party_entry(name) for name in PARTIES},
        "signers": signers,
        "open": opens,
        "refuse": refuse,
        "replay": {"receiver": "echo", "sender": PARTIES["alice"].as_json(), "envelope": env("alice", "echo", "once", label="replay"),
                   "first": "opens", "second": "replayed"},
    }
    OUT.write_text(json.dumps(vectors, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}: {len(opens)} to open, {len(refuse)} to refuse, 1 replay")


if __name__ == "__main__":
    main()
