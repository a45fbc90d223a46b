/**
 * What an agent runs with, read from the `agent.json` the console offers once
 * (`{base_url, agent_id, agent_token, x25519_private_jwk, ed25519_private_jwk, webhook_secret?}`)
 * or from the environment: AGENTS_URL, AGENT_ID, AGENT_TOKEN, AGENT_X25519_JWK, AGENT_ED25519_JWK,
 * AGENT_WEBHOOK_SECRET, and AGENT_CREDENTIALS (a path to such a file) for what is not set.
 */
import { readFileSync } from "node:fs";

import { KeyPairs, type OkpJwk } from "./keys.js";

export interface Credentials { baseUrl: string; agentId: string; agentToken: string; keys: KeyPairs; webhookSecret?: string }

interface CredentialsFile {
  base_url?: string; agent_id?: string; agent_token?: string; x25519_private_jwk?: OkpJwk | string; ed25519_private_jwk?: OkpJwk | string;
  previous_x25519_private_jwks?: (OkpJwk | string)[]; webhook_secret?: string;
}

/** Build credentials from the `agent.json` shape; throws naming what is missing. */
export async function credentialsFrom(data: CredentialsFile): Promise<Credentials> {
  const missing = (["base_url", "agent_id", "agent_token", "x25519_private_jwk", "ed25519_private_jwk"] as const).filter((k) => !data[k]);
  if (missing.length) throw new Error(`credentials lack ${missing.join(", ")}`);
  const keys = await KeyPairs.fromJwks(data.x25519_private_jwk!, data.ed25519_private_jwk!, data.previous_x25519_private_jwks ?? []);
  return { baseUrl: data.base_url!.replace(/\/+$/, ""), agentId: data.agent_id!, agentToken: data.agent_token!, keys,
    webhookSecret: data.webhook_secret || undefined };
}

/** Read an `agent.json` file. */
export async function loadCredentials(path: string): Promise<Credentials> {
  return credentialsFrom(JSON.parse(readFileSync(path, "utf-8")));
}

/** Read the environment (see module doc). */
export async function credentialsFromEnv(env: NodeJS.ProcessEnv = process.env): Promise<Credentials> {
  const data: CredentialsFile = env.AGENT_CREDENTIALS ? JSON.parse(readFileSync(env.AGENT_CREDENTIALS, "utf-8")) : {};
  const map: [keyof CredentialsFile, string][] = [["base_url", "AGENTS_URL"], ["agent_id", "AGENT_ID"], ["agent_token", "AGENT_TOKEN"],
    ["x25519_private_jwk", "AGENT_X25519_JWK"], ["ed25519_private_jwk", "AGENT_ED25519_JWK"], ["webhook_secret", "AGENT_WEBHOOK_SECRET"]];
  for (const [name, variable] of map) if (env[variable]) (data as Record<string, unknown>)[name] = env[variable];
  return credentialsFrom(data);
}
