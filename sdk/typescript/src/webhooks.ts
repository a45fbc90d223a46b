/**
 * Verify a webhook delivery of the platform (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
 * `webhook-signature`, HMAC-SHA256 with the `whsec_` secret the agent registered) with the
 * `standardwebhooks` library, and read its event.
 */
import { Webhook } from "standardwebhooks";

/** `envelope.created`: a user sent the agent an envelope. */
export interface EnvelopeEvent { type: "envelope.created"; timestamp: string; data: { envelope_id: string; agent_id: string; user_id: string; envelope: string; created_at: string } }
/** `security_alert`: something changed that affects the agent (a rotation, a revocation). */
export interface SecurityAlertEvent { type: "security_alert"; code: string; data: Record<string, unknown> }
export type WebhookEvent = EnvelopeEvent | SecurityAlertEvent | { type: string; [k: string]: unknown };

/** Raised when a delivery's signature, timestamp or id does not verify. */
export class WebhookVerificationError extends Error {
  constructor(message: string) { super(message); this.name = "WebhookVerificationError"; }
}

/** Verify `body` (the raw bytes or text) against its headers and `secret`; resolve the event. Throws WebhookVerificationError. */
export function verifyWebhook(body: string | Buffer, headers: Record<string, string | string[] | undefined>, secret: string): WebhookEvent {
  const flat: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) flat[k.toLowerCase()] = Array.isArray(v) ? v[0] : v;
  try {
    return new Webhook(secret).verify(typeof body === "string" ? body : body.toString("utf-8"), flat) as WebhookEvent;
  } catch (err) {
    throw new WebhookVerificationError(`the webhook does not verify: ${(err as Error).message}`);
  }
}
