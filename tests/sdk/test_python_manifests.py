"""sdk/python's capability manifests (docs/manifests.md) against the shared vectors, and against
a2a-sdk's own card-signature verifier: one signed card for both worlds."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from google.protobuf.json_format import ParseDict

from a2a.types import a2a_pb2
from a2a.utils._jcs import canonicalize
from a2a.utils.signing import create_signature_verifier
from agents_identity.keys import key_from_jwk
from agents_identity.manifest import ManifestError, build_manifest, canonical, jcs, sign_manifest, verify_manifest

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "docs" / "manifests-v1-vectors.json").read_text())
KEYS = {k["kid"]: Ed25519PublicKey.from_public_bytes(base64.b64decode(k["signing_public_key"])) for k in VECTORS["agent_keys"]}


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=lambda v: v["name"])
def test_valid_vectors_verify_with_the_canonical_form_written_down(vector):
    assert canonical(vector["manifest"]).decode() == vector["canonical"]
    assert verify_manifest(vector["manifest"], KEYS) == vector["kid"]


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vectors_are_refused_naming_the_field(vector):
    with pytest.raises(ManifestError) as refused:
        verify_manifest(vector["manifest"], KEYS)

    assert (refused.value.reason, refused.value.field) == (vector["reason"], vector["field"])


def test_a_manifest_built_and_signed_here_verifies_with_a2a_sdks_verifier():
    signing = key_from_jwk(VECTORS["agent_keys"][0]["ed25519_private_jwk"])
    card = sign_manifest(build_manifest(name="echo_bot", description="Echoes", transports=["websocket"],
                                        messages_url="https://agents.example/v1/identity/agents/a/messages"), signing)

    def key_of(kid, jku):
        if kid not in KEYS:
            raise jwt.exceptions.InvalidKeyError(kid)
        return KEYS[kid]

    create_signature_verifier(key_of, ["EdDSA"])(ParseDict(card, a2a_pb2.AgentCard()))  # raises if it does not verify
    card["description"] = "changed"
    with pytest.raises(Exception):
        create_signature_verifier(key_of, ["EdDSA"])(ParseDict(card, a2a_pb2.AgentCard()))


def test_jcs_matches_rfc_8785_on_numbers_strings_and_key_order():
    values = [0, -0.0, 1, 1.5, 1e21, 1e-7, 1e-6, 0.1, 2**53 - 1, 5e-324, 1.7976931348623157e308, 333333333.33333329,
              {"\u20ac": 1, "\U0001f600": 2, "a": [None, True, "é\n\x01"]}]
    for value in values:
        assert jcs(value) == canonicalize(value)
    with pytest.raises(ValueError):
        jcs(2**53)


def test_the_committed_vectors_are_what_the_script_writes(tmp_path, monkeypatch):
    """docs/manifests.md says a rerun of scripts/make_manifest_vectors.py writes the same file: hold it."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("make_manifest_vectors", root / "scripts" / "make_manifest_vectors.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(script, "ROOT", tmp_path)
    monkeypatch.setattr(script, "OUT", tmp_path / "manifests-v1-vectors.json")

    script.main()

    assert (tmp_path / "manifests-v1-vectors.json").read_text() == (root / "docs" / "manifests-v1-vectors.json").read_text()
