/** The identity API as an agent calls it (`Authorization: Bearer agt_…`): keys, users' keys, sending to a user. */
import type { Credentials } from "./credentials.js";
import type { KeyPairs } from "./keys.js";
import type { KeyStatus } from "./envelope.js";

/** An error answer of the platform: `{status, code, error}` plus named extras. */
export class ApiError extends Error {
  constructor(readonly status: number, readonly code: string, message: string, readonly body: Record<string, unknown> = {}) {
    super(`${status} ${code}: ${message}`);
    this.name = "ApiError";
  }
}

/** A registered key set's public half, as the platform lists it. */
export interface PublicKeys { kid: string; public_key: string; signing_kid: string; signing_public_key: string; status: KeyStatus }

export class IdentityClient {
  constructor(readonly credentials: Pick<Credentials, "baseUrl" | "agentId" | "agentToken">) {}

  /** Call `method path` with the agent token; resolve the JSON answer, or throw ApiError. */
  async request<T = Record<string, unknown>>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await fetch(this.credentials.baseUrl + path, {
      method, headers: { Authorization: `Bearer ${this.credentials.agentToken}`, Accept: "application/json", ...(body === undefined ? {} : { "Content-Type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    const data = text ? JSON.parse(text) : {};
    if (!res.ok) throw new ApiError(res.status, String(data.code ?? "error"), String(data.error ?? res.statusText), data);
    return data as T;
  }

  private agentPath(): string { return `/v1/identity/agents/${encodeURIComponent(this.credentials.agentId)}`; }

  /** Register the agent's public keys (and a webhook agent's secret); resolve the key set. */
  registerKeys(keys: KeyPairs, webhookSecret?: string): Promise<PublicKeys> {
    return this.request("POST", `${this.agentPath()}/keys/register`, { ...keys.registration(), ...(webhookSecret ? { webhook_secret: webhookSecret } : {}) });
  }

  /** A user's key sets (only while the user has an active relation with this agent; else ApiError 404). */
  async userKeys(userId: string): Promise<PublicKeys[]> {
    return (await this.request<{ keys: PublicKeys[] }>("GET", `${this.agentPath()}/users/${encodeURIComponent(userId)}/keys`)).keys;
  }

  /** Put an envelope in a user's inbox; resolve the stored envelope's view. */
  sendToUser(userId: string, envelope: string): Promise<{ envelope_id: string; message_id: string }> {
    return this.request("POST", `/v1/identity/users/${encodeURIComponent(userId)}/messages`, { envelope });
  }
}
