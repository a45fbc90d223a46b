/** Standard Webhooks verification and the replay window of sdk/typescript. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Webhook } from "standardwebhooks";

import { ReplayWindow, EnvelopeError, type Header } from "../src/envelope.js";
import { newWebhookSecret } from "../src/keys.js";
import { verifyWebhook, WebhookVerificationError } from "../src/webhooks.js";

test("a delivery verifies; a tampered body or another secret does not", () => {
  const secret = newWebhookSecret();
  const body = JSON.stringify({ type: "envelope.created", timestamp: "2026-01-01T00:00:00Z", data: { envelope: "v1.x" } });
  const now = new Date();
  const headers = { "webhook-id": "msg_1", "webhook-timestamp": String(Math.floor(now.getTime() / 1000)), "webhook-signature": new Webhook(secret).sign("msg_1", now, body) };
  const event = verifyWebhook(body, headers, secret) as { data: { envelope: string } };
  assert.equal(event.data.envelope, "v1.x");
  assert.throws(() => verifyWebhook(body.replace("v1.x", "v1.y"), headers, secret), WebhookVerificationError);
  assert.throws(() => verifyWebhook(body, headers, newWebhookSecret()), WebhookVerificationError);
});

test("the replay window refuses a seen id and a stale or future time, and forgets past its age", () => {
  const window = new ReplayWindow(100, 10, 2);
  const h = (mid: string, ts: number): Header => ({ mid, ts, sender: { type: "user", id: "u" }, recipient: { type: "agent", id: "a" }, rkid: "0".repeat(16), skid: "0".repeat(16) });
  window.check(h("a".repeat(16), 1000), 1000);
  window.remember(h("a".repeat(16), 1000), 1000);
  assert.throws(() => window.check(h("a".repeat(16), 1000), 1001), (e: unknown) => e instanceof EnvelopeError && e.code === "replayed");
  assert.throws(() => window.check(h("b".repeat(16), 800), 1000), (e: unknown) => e instanceof EnvelopeError && e.code === "stale");
  assert.throws(() => window.check(h("b".repeat(16), 1100), 1000), (e: unknown) => e instanceof EnvelopeError && e.code === "stale");
  window.remember(h("c".repeat(16), 1150), 1150);  // the first id is now older than the window: dropped
  assert.equal(window.has({ type: "user", id: "u" }, "a".repeat(16)), false);
});
