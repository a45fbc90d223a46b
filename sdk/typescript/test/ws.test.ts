/** The WebSocket client of sdk/typescript against a stand-in for /v1/identity/ws: acknowledgements, reconnection, security_alert, the final 4403. */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { AddressInfo } from "node:net";
import { WebSocketServer, type WebSocket } from "ws";

import { AgentSocket, CLOSE_REVOKED } from "../src/ws.js";

test("acknowledges each envelope, reconnects after a drop, hands security_alert over and stops for good on 4403", async () => {
  const auth: string[] = [];
  const acks: unknown[] = [];
  const handled: string[] = [];
  const alerts: string[] = [];
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  server.on("connection", (ws: WebSocket, request) => {
    auth.push(String(request.headers.authorization));
    const n = auth.length;
    ws.once("message", (data) => {
      acks.push(JSON.parse(data.toString()));
      if (n === 1) { ws.close(1012); return; }  // a restart: the client must come back
      ws.send(JSON.stringify({ type: "security_alert", code: "agent.token_revoked", data: {} }));
      ws.close(CLOSE_REVOKED);
    });
    ws.send(JSON.stringify({ type: "envelope", envelope_id: `env_${n}`, user_id: "u", envelope: "v1.x", created_at: "x" }));
  });
  const port = (server.address() as AddressInfo).port;
  try {
    const closed = new Promise<number>((resolve) => {
      const socket = new AgentSocket(`ws://127.0.0.1:${port}/v1/identity/ws`, "agt_t", {
        onEnvelope: (frame) => { handled.push(frame.envelope_id); },
        onSecurityAlert: (alert) => { alerts.push(alert.code); },
        onClose: (code, final) => { if (final) resolve(code); },
      }, 10);
      void socket.start();
    });
    assert.equal(await closed, CLOSE_REVOKED);
    await new Promise((resolve) => setTimeout(resolve, 100));  // a (wrong) reconnect after 4403 would come within 10 ms
    assert.deepEqual(auth, ["Bearer agt_t", "Bearer agt_t"]);
    assert.deepEqual(handled, ["env_1", "env_2"]);
    assert.deepEqual(acks, [{ type: "ack", envelope_ids: ["env_1"] }, { type: "ack", envelope_ids: ["env_2"] }]);
    assert.deepEqual(alerts, ["agent.token_revoked"]);
  } finally {
    server.close();
  }
});
