"""The shared envelope test vectors (docs/envelopes-v1-vectors.json) as Python SDK objects."""

from __future__ import annotations

import base64
import json
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agents_identity.envelope import Party, ReplayWindow, Receiver, SignerKey
from agents_identity.keys import key_from_jwk

PATH = Path(__file__).resolve().parents[2] / "docs" / "envelopes-v1-vectors.json"
VECTORS = json.loads(PATH.read_text())


def party(data: dict) -> Party:
    return Party(data["type"], data["id"])


def signer_lookup():
    """Return `(sender, skid) -> SignerKey | None` over the vectors' registered signing keys."""
    table = {(s["party"]["type"], s["party"]["id"], s["kid"]): SignerKey(Ed25519PublicKey.from_public_bytes(base64.b64decode(s["public_key"])), s["status"])
             for s in VECTORS["signers"]}
    return lambda sender, skid: table.get((sender.type, sender.id, skid))


def receiver(name: str) -> Receiver:
    """A fresh receiver (its own replay window) for vector party `name`."""
    entry = VECTORS["parties"][name]
    keys = [key_from_jwk(entry["x25519_private_jwk"])] + [key_from_jwk(j) for j in entry["previous_x25519_private_jwks"]]
    return Receiver(me=party(entry["party"]), private_keys=keys, signer=signer_lookup(), replay=ReplayWindow(max_age=VECTORS["replay_window_seconds"]))
