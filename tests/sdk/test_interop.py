"""sdk/python and sdk/typescript open each other's envelopes (beyond the shared vectors, which Python
wrote): node seals with the built TypeScript SDK, Python opens; Python seals, node opens."""

from __future__ import annotations

import json
import subprocess

import pytest

from agents_identity.envelope import Party, seal, text_body
from agents_identity.keys import key_from_jwk
from tests.sdk.example_agents import TS, build_typescript_sdk
from tests.sdk.vectors import VECTORS, receiver

NODE = """
import { readFileSync } from "node:fs";
const E = await import(process.argv[1] + "/dist/src/envelope.js");
const K = await import(process.argv[1] + "/dist/src/keys.js");
const V = JSON.parse(readFileSync(process.argv[1] + "/../../docs/envelopes-v1-vectors.json", "utf-8"));
const input = JSON.parse(readFileSync(0, "utf-8"));
const alice = V.parties.alice, echo = V.parties.echo;
const signing = await K.importPrivateJwk(alice.ed25519_private_jwk);
const sealed = await E.seal({ body: E.textBody("sealed by node"), sender: alice.party, recipient: echo.party,
  recipientPublicKey: (await K.importPrivateJwk(echo.x25519_private_jwk)).publicKey, signingKey: signing.privateKey, signingPublicKey: signing.publicKey });
const keys = await K.KeyPairs.fromJwks(echo.x25519_private_jwk, echo.ed25519_private_jwk);
const signers = new Map(V.signers.map((s) => [s.party.type + ":" + s.party.id + ":" + s.kid, { publicKey: E.fromBase64(s.public_key), status: s.status }]));
const r = new E.Receiver({ me: echo.party, keys: keys.decryptionKeys(), signer: (s, k) => signers.get(s.type + ":" + s.id + ":" + k) ?? null });
const opened = await r.open(input.envelope, { sender: alice.party });
console.log(JSON.stringify({ sealed, opened: opened.body }));
"""


@pytest.fixture(scope="module")
def node_sdk():
    build_typescript_sdk()


def test_python_and_typescript_open_each_others_envelopes(node_sdk):
    alice, echo = VECTORS["parties"]["alice"], VECTORS["parties"]["echo"]
    from_python = seal(body=text_body("sealed by python"), sender=Party("user", "alice"), recipient=Party(**echo["party"]),
                       recipient_key=key_from_jwk(echo["x25519_private_jwk"]).public_key(), signing_key=key_from_jwk(alice["ed25519_private_jwk"]))
    done = subprocess.run(["node", "--input-type=module", "-e", NODE, str(TS)], input=json.dumps({"envelope": from_python}),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert out["opened"] == {"type": "text", "text": "sealed by python"}
    assert receiver("echo").open(out["sealed"], sender=Party("user", "alice")).text == "sealed by node"
