/**
 * Capability manifests, version v1 (docs/manifests.md): an A2A agent card, signed.
 *
 * A manifest is an A2A v1.0 `AgentCard` (proto3 JSON) carrying one extension,
 * `urn:agents:manifest:v1` (`params`: `envelopeVersion` "v1", `transports` "webhook" and/or
 * "websocket"), and `signatures`: JWS with a detached payload, `alg` "EdDSA" (Ed25519) by a
 * signing key the agent registered (`kid` its key id), over the canonical card — the card
 * without `signatures` and without empty strings, arrays and objects, serialized by RFC 8785
 * (JCS). A2A's own card-signing rule, so any A2A verifier checks the same signature.
 *
 * Uses WebCrypto only (Ed25519), like the envelopes.
 */
import { b64u, kid, unb64u } from "./envelope.js";

export const EXTENSION_PREFIX = "urn:agents:manifest:";
export const MANIFEST_VERSION = "v1";
export const EXTENSION_URI = EXTENSION_PREFIX + MANIFEST_VERSION;
export const ENVELOPE_VERSION = "v1";
export const ENVELOPE_BINDING = "AGENTS-ENVELOPE";
export const TRANSPORTS = ["webhook", "websocket"] as const;
export type Transport = (typeof TRANSPORTS)[number];

export type ManifestReason = "schema" | "unknown_extension_version" | "bad_extension" | "unsigned" | "bad_signature";
export const MANIFEST_REASONS: Record<ManifestReason, string> = {
  schema: "the manifest is not an A2A agent card",
  unknown_extension_version: "the manifest extension's version is not one this implementation knows",
  bad_extension: "the manifest extension's params are wrong",
  unsigned: "the manifest carries no signature",
  bad_signature: "no signature of the manifest verifies with a signing key of the agent",
};

/** A refused manifest: `reason` and `field`, the JSON path at fault (the server answers 400 with the same two). */
export class ManifestError extends Error {
  constructor(public readonly reason: ManifestReason, public readonly field: string, detail = "") {
    super(`${MANIFEST_REASONS[reason]}: ${field}${detail ? ` (${detail})` : ""}`);
    this.name = "ManifestError";
  }
}

// deno-lint-ignore no-explicit-any
type Json = any;
const utf8 = new TextEncoder();
const MAX_DEPTH = 32;

function buf(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

/** RFC 8785: keys sorted by UTF-16 code units, no whitespace, ECMAScript strings and numbers. */
export function jcs(value: Json, depth = 0): string {
  if (depth > MAX_DEPTH) throw new Error(`nesting deeper than ${MAX_DEPTH}`);
  if (value === null) return "null";
  if (typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new Error("NaN and infinities are not JSON");
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) return "[" + value.map((v) => jcs(v, depth + 1)).join(",") + "]";
  if (typeof value === "object") {
    return "{" + Object.keys(value).sort().map((k) => JSON.stringify(k) + ":" + jcs(value[k], depth + 1)).join(",") + "}";
  }
  throw new Error(`${typeof value} is not JSON`);
}

function withoutEmpties(value: Json): Json {
  if (Array.isArray(value)) {
    const kept = value.map(withoutEmpties).filter((v) => v !== undefined);
    return kept.length ? kept : undefined;
  }
  if (value !== null && typeof value === "object") {
    const kept: Record<string, Json> = {};
    for (const [k, v] of Object.entries(value)) {
      const c = withoutEmpties(v);
      if (c !== undefined) kept[k] = c;
    }
    return Object.keys(kept).length ? kept : undefined;
  }
  if (value === "") return undefined;
  return value;
}

/** The bytes a manifest's signatures cover: JCS of the card without `signatures` and empties (UTF-8). */
export function canonical(card: Record<string, Json>): Uint8Array {
  const body: Record<string, Json> = {};
  for (const [k, v] of Object.entries(card)) if (k !== "signatures") body[k] = v;
  return utf8.encode(jcs(withoutEmpties(body) ?? {}));
}

export interface BuildOptions {
  name: string;
  description: string;
  transports: Transport[];
  /** Where people send the agent v1 envelopes: `{platform}/v1/identity/agents/{agent_id}/messages`. */
  messagesUrl: string;
  version?: string;
  skills?: Record<string, Json>[];
  provider?: { organization: string; url: string };
  /** The agent's own A2A JSON-RPC endpoint, if it has one. */
  a2aUrl?: string;
}

/** An unsigned v1 manifest (an A2A card as JSON) for an identity agent. */
export function buildManifest(o: BuildOptions): Record<string, Json> {
  const card: Record<string, Json> = {
    name: o.name,
    description: o.description,
    version: o.version ?? "1.0.0",
    capabilities: { streaming: false, pushNotifications: false, extensions: [
      { uri: EXTENSION_URI, description: "Agents platform capability manifest: reached by v1 envelopes",
        params: { envelopeVersion: ENVELOPE_VERSION, transports: [...o.transports] } }] },
    defaultInputModes: ["text/plain"],
    defaultOutputModes: ["text/plain"],
    skills: o.skills ?? [{ id: "message", name: "message", description: o.description, tags: ["message"] }],
    supportedInterfaces: [{ url: o.messagesUrl, protocolBinding: ENVELOPE_BINDING, protocolVersion: ENVELOPE_VERSION }],
  };
  if (o.a2aUrl) card.supportedInterfaces.push({ url: o.a2aUrl, protocolBinding: "JSONRPC", protocolVersion: "1.0" });
  if (o.provider) card.provider = { ...o.provider };
  checkManifest(card);
  return card;
}

/** Check a manifest's shape and its extension (not its signatures); throw `ManifestError` (same order as sdk/python and the server). */
export function checkManifest(card: unknown): asserts card is Record<string, Json> {
  if (!card || typeof card !== "object" || Array.isArray(card)) throw new ManifestError("schema", "$", "a JSON object");
  const c = card as Record<string, Json>;
  for (const field of ["name", "description", "version"]) {
    if (typeof c[field] !== "string" || !c[field].trim()) throw new ManifestError("schema", field, "a non-empty string");
  }
  for (const field of ["supportedInterfaces", "skills"]) {
    if (!Array.isArray(c[field]) || !c[field].length) throw new ManifestError("schema", field, "a non-empty list");
  }
  const extensions = c.capabilities && typeof c.capabilities === "object" ? c.capabilities.extensions : undefined;
  if (!Array.isArray(extensions)) throw new ManifestError("schema", "capabilities.extensions", "a list");
  const ours = extensions.map((e: Json, i: number) => [i, e] as const)
    .filter(([, e]) => e && typeof e === "object" && String(e.uri ?? "").startsWith(EXTENSION_PREFIX));
  if (ours.length !== 1) throw new ManifestError("bad_extension", "capabilities.extensions", `exactly one ${EXTENSION_PREFIX}<version> extension`);
  const [index, extension] = ours[0];
  const where = `capabilities.extensions[${index}]`;
  if (extension.uri !== EXTENSION_URI) throw new ManifestError("unknown_extension_version", `${where}.uri`, String(extension.uri).slice(0, 80));
  const params = extension.params;
  if (!params || typeof params !== "object" || Array.isArray(params)) throw new ManifestError("bad_extension", `${where}.params`, "an object");
  if (params.envelopeVersion !== ENVELOPE_VERSION) throw new ManifestError("bad_extension", `${where}.params.envelopeVersion`, `must be "${ENVELOPE_VERSION}"`);
  const t = params.transports;
  if (!Array.isArray(t) || !t.length || t.some((x: Json) => !(TRANSPORTS as readonly string[]).includes(x)) || new Set(t).size !== t.length) {
    throw new ManifestError("bad_extension", `${where}.params.transports`, `a non-empty list of ${TRANSPORTS.join(", ")}`);
  }
}

/** A copy of `card` with one more signature by `signingKey` (WebCrypto Ed25519 private key; `publicKey` its raw 32 bytes). */
export async function signManifest(card: Record<string, Json>, signingKey: CryptoKey, publicKey: Uint8Array): Promise<Record<string, Json>> {
  checkManifest(card);
  const header = { alg: "EdDSA", kid: await kid(publicKey), typ: "JOSE" };
  const protectedPart = b64u(utf8.encode(JSON.stringify(header)));
  const signingInput = utf8.encode(`${protectedPart}.${b64u(canonical(card))}`);
  const signature = new Uint8Array(await crypto.subtle.sign({ name: "Ed25519" }, signingKey, buf(signingInput)));
  const signed = structuredClone(card);
  signed.signatures = [...(signed.signatures ?? []), { protected: protectedPart, signature: b64u(signature) }];
  return signed;
}

/**
 * Check `card` and its signatures; resolve the `kid` of the first that verifies.
 * `keys` maps key ids to the agent's registered Ed25519 signing keys (raw 32 bytes; current and in grace).
 * Only `alg` "EdDSA" with a `kid` in `keys` counts. Rejects with `ManifestError` (`unsigned`, `bad_signature`, or a shape reason).
 */
export async function verifyManifest(card: unknown, keys: Map<string, Uint8Array>): Promise<string> {
  checkManifest(card);
  const signatures = card.signatures;
  if (!Array.isArray(signatures) || !signatures.length) throw new ManifestError("unsigned", "signatures");
  const payload = b64u(canonical(card));
  for (const entry of signatures) {
    if (!entry || typeof entry.protected !== "string" || typeof entry.signature !== "string") continue;
    let header: Json;
    let signature: Uint8Array;
    try {
      header = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(unb64u(entry.protected)));
      signature = unb64u(entry.signature);
    } catch { continue; }
    if (!header || header.alg !== "EdDSA" || typeof header.kid !== "string" || !keys.has(header.kid)) continue;
    const key = await crypto.subtle.importKey("raw", buf(keys.get(header.kid)!), { name: "Ed25519" }, false, ["verify"]);
    if (await crypto.subtle.verify({ name: "Ed25519" }, key, buf(signature), buf(utf8.encode(`${entry.protected}.${payload}`)))) return header.kid;
  }
  throw new ManifestError("bad_signature", "signatures");
}
