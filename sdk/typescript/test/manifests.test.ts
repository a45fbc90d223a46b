/** sdk/typescript against the shared capability-manifest vectors (docs/manifests-v1-vectors.json). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { fromBase64 } from "../src/envelope.js";
import { importPrivateJwk } from "../src/keys.js";
import { ManifestError, buildManifest, canonical, jcs, signManifest, verifyManifest } from "../src/manifest.js";

const V = JSON.parse(readFileSync(new URL("../../../../docs/manifests-v1-vectors.json", import.meta.url), "utf-8"));
const keys = new Map<string, Uint8Array>(V.agent_keys.map((k: { kid: string; signing_public_key: string }) => [k.kid, fromBase64(k.signing_public_key)]));
const decode = new TextDecoder();

for (const c of V.valid) {
  test(`verifies ${c.name}`, async () => {
    assert.equal(decode.decode(canonical(c.manifest)), c.canonical);
    assert.equal(await verifyManifest(c.manifest, keys), c.kid);
  });
}

for (const c of V.invalid) {
  test(`refuses ${c.name} (${c.reason} at ${c.field})`, async () => {
    await assert.rejects(verifyManifest(c.manifest, keys), (err: unknown) => {
      assert.ok(err instanceof ManifestError, String(err));
      assert.equal(err.reason, c.reason);
      assert.equal(err.field, c.field);
      return true;
    });
  });
}

test("a manifest built and signed here is byte-for-byte the one sdk/python signs", async () => {
  const pair = await importPrivateJwk(V.agent_keys[0].ed25519_private_jwk);
  const card = buildManifest({ name: "echo_bot", description: "Echoes what you send", transports: ["webhook"],
    messagesUrl: "https://agents.example/v1/identity/agents/agent_0123456789abcdef0123456789abcdef/messages" });
  const signed = await signManifest(card, pair.privateKey, pair.publicKey);
  assert.deepEqual(signed, V.valid[0].manifest);  // Ed25519 is deterministic: the same key signs the same bytes the same way
  signed.description = "changed";
  await assert.rejects(verifyManifest(signed, keys), ManifestError);
});

test("jcs writes numbers and key order as RFC 8785 says", () => {
  assert.equal(jcs({ b: [1e21, 1e-7, 0.1, -0], a: "é\n", "\u20ac": 1, "\ud83d\ude00": 2 }), '{"a":"é\\n","b":[1e+21,1e-7,0.1,0],"€":1,"😀":2}');
});
