/**
 * An agent's (or a user's) key pairs in WebCrypto: X25519 to open envelopes, Ed25519 to sign them.
 * Loaded from the private JWKs the console shows once (`{kty: "OKP", crv, x, d}`), or made new.
 */
import { b64u, kid, toBase64, unb64u, type DecryptionKey } from "./envelope.js";

export interface OkpJwk { kty: "OKP"; crv: "X25519" | "Ed25519"; x: string; d?: string; [k: string]: unknown }

export interface KeyPair { privateKey: CryptoKey; publicKey: Uint8Array; kid: string }

async function rawPublic(key: CryptoKey): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.exportKey("raw", key));
}

/** Import a private OKP JWK (X25519 or Ed25519); its `x` must be the public half of its `d`. */
export async function importPrivateJwk(jwk: OkpJwk | string): Promise<KeyPair> {
  const j = (typeof jwk === "string" ? JSON.parse(jwk) : jwk) as OkpJwk;
  if (!j || j.kty !== "OKP" || (j.crv !== "X25519" && j.crv !== "Ed25519") || !j.d || !j.x) throw new Error("not a private OKP JWK (X25519 or Ed25519)");
  const clean = { kty: "OKP", crv: j.crv, x: j.x, d: j.d };
  const alg = { name: j.crv };
  const usages: KeyUsage[] = j.crv === "X25519" ? ["deriveBits"] : ["sign"];
  const privateKey = await crypto.subtle.importKey("jwk", clean, alg, true, usages);
  const publicKey = unb64u(j.x);
  return { privateKey, publicKey, kid: await kid(publicKey) };
}

/** Export a private key as its OKP JWK (what the console shows and `agent.json` holds). */
export async function exportPrivateJwk(pair: KeyPair): Promise<OkpJwk> {
  const jwk = (await crypto.subtle.exportKey("jwk", pair.privateKey)) as JsonWebKey;
  return { kty: "OKP", crv: jwk.crv as "X25519" | "Ed25519", x: jwk.x as string, d: jwk.d as string };
}

async function generate(name: "X25519" | "Ed25519"): Promise<KeyPair> {
  const usages: KeyUsage[] = name === "X25519" ? ["deriveBits"] : ["sign", "verify"];
  const pair = (await crypto.subtle.generateKey({ name }, true, usages)) as CryptoKeyPair;
  const publicKey = await rawPublic(pair.publicKey);
  return { privateKey: pair.privateKey, publicKey, kid: await kid(publicKey) };
}

/** An X25519 + Ed25519 key set, plus older X25519 keys still in their grace period. */
export class KeyPairs {
  constructor(readonly x25519: KeyPair, readonly ed25519: KeyPair, readonly previousX25519: KeyPair[] = []) {}

  static async generate(): Promise<KeyPairs> { return new KeyPairs(await generate("X25519"), await generate("Ed25519")); }

  static async fromJwks(x25519: OkpJwk | string, ed25519: OkpJwk | string, previous: (OkpJwk | string)[] = []): Promise<KeyPairs> {
    return new KeyPairs(await importPrivateJwk(x25519), await importPrivateJwk(ed25519), await Promise.all(previous.map(importPrivateJwk)));
  }

  /** Standard base64 of the raw public keys: the body of `keys/register` or `users/me/keys`. */
  registration(): { public_key: string; signing_public_key: string } {
    return { public_key: toBase64(this.x25519.publicKey), signing_public_key: toBase64(this.ed25519.publicKey) };
  }

  /** Every X25519 key this holder opens with (current first). */
  decryptionKeys(): DecryptionKey[] {
    return [this.x25519, ...this.previousX25519].map((k) => ({ privateKey: k.privateKey, publicKey: k.publicKey }));
  }
}

/** A fresh Standard Webhooks secret: "whsec_" + base64 of 32 random bytes. */
export function newWebhookSecret(): string { return "whsec_" + toBase64(crypto.getRandomValues(new Uint8Array(32))); }

export { b64u };
