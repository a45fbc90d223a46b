/**
 * Envelopes v1 (docs/envelopes.md): seal, sign, open and verify identity messages.
 *
 * `v1.<header>.<sealed>.<signature>`, each part base64url without padding:
 * - header: UTF-8 JSON `{v: "v1", mid, from: {type, id}, to: {type, id}, rkid, skid, ts}`;
 * - sealed: `enc ‖ ciphertext` of HPKE (RFC 9180) base mode, single shot,
 *   DHKEM(X25519, HKDF-SHA256) / HKDF-SHA256 / AES-128-GCM, to the recipient's X25519 key, with
 *   `info = "agents-envelope-v1" ‖ 0x00 ‖ <header part>` and no AAD;
 * - signature: Ed25519 over the ASCII bytes `v1.<header>.<sealed>`.
 * A key id is hex of the first 8 bytes of SHA-256 of the raw 32-byte public key.
 *
 * Uses @hpke/core (HPKE) and WebCrypto (X25519, Ed25519, SHA-256) only, so the same module runs
 * in Node.js ≥ 20 and in browsers (the console loads its bundle). No primitive is implemented here.
 */
import { Aes128Gcm, CipherSuite, DhkemX25519HkdfSha256, HkdfSha256 } from "@hpke/core";

export const VERSION = "v1";
export const MAX_HEADER_BYTES = 2048;
const INFO_PREFIX = new TextEncoder().encode("agents-envelope-v1\u0000");
const MID_RE = /^[A-Za-z0-9_-]{16,64}$/;
const KID_RE = /^[0-9a-f]{16}$/;
const B64U_RE = /^[A-Za-z0-9_-]*$/;
const ENC_BYTES = 32;
const TAG_BYTES = 16;

export type Reason =
  | "malformed" | "unsupported_version" | "not_addressed_to_you" | "sender_mismatch" | "unknown_key" | "unknown_signer"
  | "signer_key_revoked" | "bad_signature" | "cannot_decrypt" | "replayed" | "stale";

/** Why an envelope was refused, each with the sentence shown to people (the same in every implementation). */
export const REASONS: Record<Reason, string> = {
  malformed: "the envelope is not a well-formed v1 envelope",
  unsupported_version: "the envelope's version is not v1",
  not_addressed_to_you: "the envelope is addressed to someone else",
  sender_mismatch: "the envelope names a different sender than the one that delivered it",
  unknown_key: "the envelope was sealed to a key this receiver does not hold",
  unknown_signer: "the envelope was signed with a key the sender never registered",
  signer_key_revoked: "the envelope was signed with a key the sender revoked",
  bad_signature: "the signature does not verify: the envelope was altered or not signed by its sender",
  cannot_decrypt: "the envelope does not open: its ciphertext or header was altered, or it was sealed for another recipient",
  replayed: "the envelope was already received once (replay)",
  stale: "the envelope is older than the replay window, or dated in the future",
};

/** An envelope was refused: `code` says why (a key of REASONS), `message` in one sentence. */
export class EnvelopeError extends Error {
  readonly code: Reason;
  readonly detail: string;
  constructor(code: Reason, detail = "") {
    super(REASONS[code] + (detail ? ` (${detail})` : ""));
    this.name = "EnvelopeError";
    this.code = code;
    this.detail = detail;
  }
}

export type PartyType = "user" | "agent";
/** One end of an envelope: a user (by their principal's subject) or an identity agent (by agent_id). */
export interface Party { type: PartyType; id: string }
export const partyString = (p: Party): string => `${p.type}:${p.id}`;
const sameParty = (a: Party, b: Party): boolean => a.type === b.type && a.id === b.id;

export interface Header { mid: string; sender: Party; recipient: Party; rkid: string; skid: string; ts: number }
export interface Parsed { header: Header; headerPart: string; sealedPart: string; signaturePart: string }
export type KeyStatus = "current" | "grace" | "expired" | "revoked";
/** A sender's registered Ed25519 public key (raw 32 bytes) and its status. */
export interface SignerKey { publicKey: Uint8Array; status: KeyStatus }
export type SignerLookup = (sender: Party, skid: string) => Promise<SignerKey | null> | SignerKey | null;
/** An opened, verified envelope. */
export interface Opened { mid: string; sender: Party; recipient: Party; ts: number; body: Record<string, unknown>; text: string; signerKid: string; recipientKid: string }

const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder("utf-8", { fatal: true });
const suite = new CipherSuite({ kem: new DhkemX25519HkdfSha256(), kdf: new HkdfSha256(), aead: new Aes128Gcm() });

function buf(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

/** base64url without padding. */
export function b64u(bytes: Uint8Array): string {
  let s = "";
  for (let i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
  return btoa(s).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** Decode base64url (padded or not); EnvelopeError("malformed") when it is not. */
export function unb64u(text: string): Uint8Array {
  if (!B64U_RE.test(text)) throw new EnvelopeError("malformed", "not base64url");
  const std = text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4);
  let raw: string;
  try { raw = atob(std); } catch { throw new EnvelopeError("malformed", "not base64url"); }
  const out = new Uint8Array(raw.length);
  for (let i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i);
  return out;
}

/** Standard base64 (the platform's wire form of a public key) to bytes, and back. */
export function fromBase64(text: string): Uint8Array { return unb64u(text.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")); }
export function toBase64(bytes: Uint8Array): string {
  const u = b64u(bytes).replace(/-/g, "+").replace(/_/g, "/");
  return u + "=".repeat((4 - (u.length % 4)) % 4);
}

/** The key id of a raw 32-byte public key: hex of SHA-256(raw)[:8]. */
export async function kid(rawPublicKey: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", buf(rawPublicKey)));
  return Array.from(digest.slice(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
}

function party(value: unknown, where: string): Party {
  const v = value as { type?: unknown; id?: unknown } | null;
  if (!v || typeof v !== "object" || (v.type !== "user" && v.type !== "agent") || typeof v.id !== "string" || !v.id) {
    throw new EnvelopeError("malformed", `\`${where}\` must be {type: user|agent, id}`);
  }
  if (v.id.length > 300) throw new EnvelopeError("malformed", `\`${where}.id\` is too long`);
  return { type: v.type, id: v.id };
}

/** Split and check the outer shape of `envelope` (nothing verified or decrypted). */
export function parse(envelope: unknown): Parsed {
  if (typeof envelope !== "string" || !envelope) throw new EnvelopeError("malformed", "an envelope is a string");
  const parts = envelope.split(".");
  if (parts[0] !== VERSION) throw new EnvelopeError("unsupported_version", `got ${JSON.stringify(parts[0].slice(0, 16))}`);
  if (parts.length !== 4) throw new EnvelopeError("malformed", "expected v1.<header>.<sealed>.<signature>");
  const [, headerPart, sealedPart, signaturePart] = parts;
  const headerBytes = unb64u(headerPart);
  if (headerBytes.length > MAX_HEADER_BYTES) throw new EnvelopeError("malformed", `the header exceeds ${MAX_HEADER_BYTES} bytes`);
  let data: Record<string, unknown>;
  try { data = JSON.parse(fromUtf8.decode(headerBytes)); } catch { throw new EnvelopeError("malformed", "the header is not JSON"); }
  if (!data || typeof data !== "object" || Array.isArray(data)) throw new EnvelopeError("malformed", "the header is not a JSON object");
  if (data.v !== VERSION) throw new EnvelopeError("unsupported_version", `header v = ${JSON.stringify(String(data.v)).slice(0, 18)}`);
  const { mid, rkid, skid, ts } = data;
  if (typeof mid !== "string" || !MID_RE.test(mid)) throw new EnvelopeError("malformed", "`mid` must be 16–64 characters of A-Z a-z 0-9 _ -");
  for (const [name, value] of [["rkid", rkid], ["skid", skid]] as const) {
    if (typeof value !== "string" || !KID_RE.test(value)) throw new EnvelopeError("malformed", `\`${name}\` must be a key id (16 hex characters)`);
  }
  if (typeof ts !== "number" || !Number.isInteger(ts) || ts < 0) throw new EnvelopeError("malformed", "`ts` must be an integer (Unix seconds)");
  const header: Header = { mid, sender: party(data.from, "from"), recipient: party(data.to, "to"), rkid: rkid as string, skid: skid as string, ts };
  if (unb64u(sealedPart).length < ENC_BYTES + TAG_BYTES) throw new EnvelopeError("malformed", "the sealed part is too short");
  if (unb64u(signaturePart).length !== 64) throw new EnvelopeError("malformed", "the signature must be 64 bytes");
  return { header, headerPart, sealedPart, signaturePart };
}

/** A fresh random message id (22 base64url characters, 128 bits). */
export function newMid(): string { return b64u(crypto.getRandomValues(new Uint8Array(16))); }

function infoFor(headerPart: string): ArrayBuffer {
  const h = utf8.encode(headerPart);
  const info = new Uint8Array(INFO_PREFIX.length + h.length);
  info.set(INFO_PREFIX, 0);
  info.set(h, INFO_PREFIX.length);
  return buf(info);
}

/** The body of a text message (`replyTo`: the mid it answers). */
export function textBody(text: string, replyTo?: string): Record<string, unknown> {
  return replyTo ? { type: "text", text, reply_to: replyTo } : { type: "text", text };
}

export interface SealOptions {
  body: Record<string, unknown>;
  sender: Party;
  recipient: Party;
  /** The recipient's registered X25519 public key, raw 32 bytes. */
  recipientPublicKey: Uint8Array;
  /** The sender's Ed25519 private key (WebCrypto) and its raw public half (for `skid`). */
  signingKey: CryptoKey;
  signingPublicKey: Uint8Array;
  mid?: string;
  ts?: number;
}

/** Seal `body` from `sender` to `recipient`'s X25519 key and sign it with the sender's Ed25519 key; resolve the envelope. */
export async function seal(o: SealOptions): Promise<string> {
  const header = {
    v: VERSION, mid: o.mid ?? newMid(), from: { type: o.sender.type, id: o.sender.id }, to: { type: o.recipient.type, id: o.recipient.id },
    rkid: await kid(o.recipientPublicKey), skid: await kid(o.signingPublicKey), ts: o.ts ?? Math.floor(Date.now() / 1000),
  };
  const headerPart = b64u(utf8.encode(JSON.stringify(header)));
  const recipientKey = await crypto.subtle.importKey("raw", buf(o.recipientPublicKey), { name: "X25519" }, true, []);
  const sender = await suite.createSenderContext({ recipientPublicKey: recipientKey, info: infoFor(headerPart) });
  const ct = new Uint8Array(await sender.seal(buf(utf8.encode(JSON.stringify(o.body)))));
  const enc = new Uint8Array(sender.enc);
  const sealed = new Uint8Array(enc.length + ct.length);
  sealed.set(enc, 0);
  sealed.set(ct, enc.length);
  const sealedPart = b64u(sealed);
  const signature = new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, o.signingKey, buf(utf8.encode(`${VERSION}.${headerPart}.${sealedPart}`))));
  return `${VERSION}.${headerPart}.${sealedPart}.${b64u(signature)}`;
}

/**
 * The message ids a receiver has seen, per sender, for `maxAge` seconds: `check` refuses one seen
 * before (`replayed`) or dated outside the window (`stale`: older than maxAge, or more than
 * maxSkew seconds ahead); `remember` records one that opened. Default window 7 days.
 */
export class ReplayWindow {
  private seen = new Map<string, number>();
  constructor(readonly maxAge = 7 * 24 * 3600, readonly maxSkew = 300, readonly maxIds = 100_000) {}

  check(header: Header, now = Date.now() / 1000): void {
    if (header.ts < now - this.maxAge || header.ts > now + this.maxSkew) throw new EnvelopeError("stale", `sealed at ${header.ts}`);
    if (this.seen.has(`${partyString(header.sender)} ${header.mid}`)) throw new EnvelopeError("replayed", `message id ${header.mid}`);
  }

  remember(header: Header, now = Date.now() / 1000): void {
    this.seen.set(`${partyString(header.sender)} ${header.mid}`, header.ts);
    for (const [key, ts] of this.seen) {
      if (this.seen.size <= this.maxIds && ts >= now - this.maxAge) break;
      this.seen.delete(key);
    }
  }

  has(sender: Party, mid: string): boolean { return this.seen.has(`${partyString(sender)} ${mid}`); }
}

/** An X25519 key pair a receiver opens with (WebCrypto private key and raw public key). */
export interface DecryptionKey { privateKey: CryptoKey; publicKey: Uint8Array }

export interface ReceiverOptions {
  me: Party;
  /** The X25519 keys this receiver holds: the current one and any still in grace. */
  keys: DecryptionKey[];
  /** `(sender, skid) → SignerKey | null`: the sender's registered Ed25519 key of that id. */
  signer: SignerLookup;
  replay?: ReplayWindow;
}

/** What a receiver needs to open envelopes; `open` checks shape, recipient, sender, keys, signature, replay, then decrypts. */
export class Receiver {
  readonly me: Party;
  readonly replay: ReplayWindow;
  private readonly signer: SignerLookup;
  private readonly keys: DecryptionKey[];
  private byKid: Map<string, DecryptionKey> | null = null;

  constructor(o: ReceiverOptions) {
    this.me = o.me;
    this.keys = o.keys;
    this.signer = o.signer;
    this.replay = o.replay ?? new ReplayWindow();
  }

  private async keyFor(rkid: string): Promise<DecryptionKey | undefined> {
    if (!this.byKid) {
      const map = new Map<string, DecryptionKey>();
      for (const k of this.keys) map.set(await kid(k.publicKey), k);
      this.byKid = map;
    }
    return this.byKid.get(rkid);
  }

  /** Open and verify `envelope`; `sender`: who the platform says delivered it (the header must name the same party). */
  async open(envelope: unknown, opts: { sender?: Party; now?: number } = {}): Promise<Opened> {
    const parsed = parse(envelope);
    const h = parsed.header;
    if (!sameParty(h.recipient, this.me)) throw new EnvelopeError("not_addressed_to_you", `addressed to ${partyString(h.recipient)}`);
    if (opts.sender && !sameParty(h.sender, opts.sender)) {
      throw new EnvelopeError("sender_mismatch", `header says ${partyString(h.sender)}, delivered by ${partyString(opts.sender)}`);
    }
    const key = await this.keyFor(h.rkid);
    if (!key) throw new EnvelopeError("unknown_key", `key id ${h.rkid}`);
    const signer = await this.signer(h.sender, h.skid);
    if (!signer || (await kid(signer.publicKey)) !== h.skid) throw new EnvelopeError("unknown_signer", `key id ${h.skid} of ${partyString(h.sender)}`);
    if (signer.status === "revoked") throw new EnvelopeError("signer_key_revoked", `key id ${h.skid} of ${partyString(h.sender)}`);
    const verifyKey = await crypto.subtle.importKey("raw", buf(signer.publicKey), { name: "Ed25519" }, false, ["verify"]);
    const signed = utf8.encode(`${VERSION}.${parsed.headerPart}.${parsed.sealedPart}`);
    if (!(await crypto.subtle.verify({ name: "Ed25519" }, verifyKey, buf(unb64u(parsed.signaturePart)), buf(signed)))) {
      throw new EnvelopeError("bad_signature");
    }
    this.replay.check(h, opts.now);
    const sealed = unb64u(parsed.sealedPart);
    let plaintext: Uint8Array;
    try {
      const publicKey = await crypto.subtle.importKey("raw", buf(key.publicKey), { name: "X25519" }, true, []);
      const ctx = await suite.createRecipientContext({
        recipientKey: { privateKey: key.privateKey, publicKey }, enc: buf(sealed.slice(0, ENC_BYTES)), info: infoFor(parsed.headerPart),
      });
      plaintext = new Uint8Array(await ctx.open(buf(sealed.slice(ENC_BYTES))));
    } catch {
      throw new EnvelopeError("cannot_decrypt");
    }
    let body: unknown;
    try { body = JSON.parse(fromUtf8.decode(plaintext)); } catch { throw new EnvelopeError("malformed", "the plaintext is not JSON"); }
    if (!body || typeof body !== "object" || Array.isArray(body)) throw new EnvelopeError("malformed", "the plaintext is not a JSON object");
    this.replay.remember(h, opts.now);
    const b = body as Record<string, unknown>;
    return { mid: h.mid, sender: h.sender, recipient: h.recipient, ts: h.ts, body: b, text: typeof b.text === "string" ? b.text : "",
      signerKid: h.skid, recipientKid: h.rkid };
  }
}
