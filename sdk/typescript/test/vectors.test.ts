/** sdk/typescript against the shared envelope vectors (docs/envelopes-v1-vectors.json). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { EnvelopeError, REASONS, Receiver, ReplayWindow, fromBase64, parse, seal, textBody, type Party, type SignerKey } from "../src/envelope.js";
import { KeyPairs, importPrivateJwk } from "../src/keys.js";

const V = JSON.parse(readFileSync(new URL("../../../../docs/envelopes-v1-vectors.json", import.meta.url), "utf-8"));
const NOW: number = V.now;

const signers = new Map<string, SignerKey>(
  V.signers.map((s: { party: Party; kid: string; public_key: string; status: SignerKey["status"] }) =>
    [`${s.party.type}:${s.party.id}:${s.kid}`, { publicKey: fromBase64(s.public_key), status: s.status }]),
);

async function receiver(name: string): Promise<Receiver> {
  const p = V.parties[name];
  const keys = await KeyPairs.fromJwks(p.x25519_private_jwk, p.ed25519_private_jwk, p.previous_x25519_private_jwks);
  return new Receiver({ me: p.party, keys: keys.decryptionKeys(), signer: (s, skid) => signers.get(`${s.type}:${s.id}:${skid}`) ?? null,
    replay: new ReplayWindow(V.replay_window_seconds) });
}

for (const c of V.open) {
  test(`opens ${c.name}`, async () => {
    const opened = await (await receiver(c.receiver)).open(c.envelope, { sender: c.sender, now: NOW });
    assert.equal(opened.mid, c.expect.mid);
    assert.deepEqual(opened.body, c.expect.body);
    assert.equal(opened.signerKid, c.expect.signer_kid);
    assert.equal(opened.recipientKid, c.expect.recipient_kid);
  });
}

for (const c of V.refuse) {
  test(`refuses ${c.name} (${c.error})`, async () => {
    const r = await receiver(c.receiver);
    await assert.rejects(r.open(c.envelope, { sender: c.sender, now: NOW }), (err: unknown) => {
      assert.ok(err instanceof EnvelopeError, String(err));
      assert.equal(err.code, c.error, err.message);
      assert.ok(err.message.startsWith(REASONS[err.code as keyof typeof REASONS]));
      return true;
    });
  });
}

test("refuses a replay the second time", async () => {
  const r = await receiver(V.replay.receiver);
  assert.equal((await r.open(V.replay.envelope, { sender: V.replay.sender, now: NOW })).text, "once");
  await assert.rejects(r.open(V.replay.envelope, { sender: V.replay.sender, now: NOW + 1 }), (e: unknown) => e instanceof EnvelopeError && e.code === "replayed");
});

test("seals what Python and the vectors' receivers open, bound to its header", async () => {
  const alice = V.parties.alice, echo = V.parties.echo;
  const signing = await importPrivateJwk(alice.ed25519_private_jwk);
  const envelope = await seal({ body: textBody("from typescript", "m".repeat(16)), sender: alice.party, recipient: echo.party,
    recipientPublicKey: (await importPrivateJwk(echo.x25519_private_jwk)).publicKey, signingKey: signing.privateKey, signingPublicKey: signing.publicKey });
  const h = parse(envelope).header;
  assert.equal(h.rkid, echo.kid);
  assert.equal(h.skid, alice.skid);
  const opened = await (await receiver("echo")).open(envelope, { sender: alice.party });
  assert.deepEqual(opened.body, { type: "text", text: "from typescript", reply_to: "m".repeat(16) });
  const fresh = await KeyPairs.generate();
  assert.equal(fresh.x25519.kid.length, 16);
  assert.notEqual(fresh.x25519.kid, echo.kid);
});
