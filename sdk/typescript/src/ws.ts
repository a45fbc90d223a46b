/**
 * The identity WebSocket (`/v1/identity/ws`, `Authorization: Bearer agt_…`) with acknowledgements and
 * reconnection. Envelopes arrive oldest first (those that waited included); each is handed to
 * `onEnvelope` one at a time and acknowledged after it returns — also when it threw (an envelope
 * that cannot open never will: acknowledging it stops its redelivery). Unacknowledged envelopes
 * come again on the next connection, so a handler must be idempotent (the replay window makes
 * a redelivered envelope refuse as `replayed`). On a dropped connection it reconnects with
 * exponential backoff (0.5 s doubling to 30 s); a refused or revoked token (close 4401/4403) stops it.
 */
import WebSocket from "ws";

export interface EnvelopeFrame { type: "envelope"; envelope_id: string; user_id: string; envelope: string; created_at: string }
export interface SecurityAlertFrame { type: "security_alert"; code: string; data: Record<string, unknown> }
export interface SocketHandlers {
  onEnvelope(frame: EnvelopeFrame): Promise<void> | void;
  onSecurityAlert?(alert: SecurityAlertFrame): Promise<void> | void;
  onOpen?(): void;
  /** The socket closed; `final` when it will not reconnect (token refused or revoked, or stop()). */
  onClose?(code: number, final: boolean): void;
}

export const CLOSE_UNAUTHORIZED = 4401;
export const CLOSE_REVOKED = 4403;

interface Pending { resolve(v: { envelope_id: string }): void; reject(e: Error): void }

export class AgentSocket {
  private ws: WebSocket | null = null;
  private stopped = false;
  private delay: number;
  private queue: Promise<void> = Promise.resolve();
  private pending: Pending[] = [];
  private opened: Promise<void>;
  private markOpen!: () => void;

  constructor(readonly url: string, private readonly token: string, private readonly handlers: SocketHandlers,
              readonly minDelayMs = 500, readonly maxDelayMs = 30_000) {
    this.delay = minDelayMs;
    this.opened = new Promise((resolve) => { this.markOpen = resolve; });
  }

  /** Connect (and keep reconnecting until stop()); resolves once the first connection is open. */
  start(): Promise<void> { this.connect(); return this.opened; }

  /** Close for good; pending sends reject. */
  stop(): void {
    this.stopped = true;
    this.ws?.close(1000);
    this.failPending(new Error("the socket was stopped"));
  }

  /** Send an envelope to a user over the socket; resolves `{envelope_id}` or rejects with the platform's error sentence. */
  send(userId: string, envelope: string): Promise<{ envelope_id: string }> {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error("the socket is not open"));
    return new Promise((resolve, reject) => {
      this.pending.push({ resolve, reject });
      ws.send(JSON.stringify({ type: "message", user_id: userId, envelope }));
    });
  }

  private failPending(err: Error): void {
    for (const p of this.pending.splice(0)) p.reject(err);
  }

  private connect(): void {
    if (this.stopped) return;
    const ws = new WebSocket(this.url, { headers: { Authorization: `Bearer ${this.token}` } });
    this.ws = ws;
    ws.on("open", () => { this.delay = this.minDelayMs; this.markOpen(); this.handlers.onOpen?.(); });
    ws.on("message", (data) => this.onFrame(ws, data.toString()));
    ws.on("error", () => { /* a close follows */ });
    ws.on("close", (code) => {
      const final = this.stopped || code === CLOSE_UNAUTHORIZED || code === CLOSE_REVOKED;
      this.failPending(new Error(`the socket closed (${code})`));
      this.handlers.onClose?.(code, final);
      if (final) { this.stopped = true; return; }
      setTimeout(() => this.connect(), this.delay);
      this.delay = Math.min(this.maxDelayMs, this.delay * 2);
    });
  }

  private onFrame(ws: WebSocket, text: string): void {
    let frame: Record<string, unknown>;
    try { frame = JSON.parse(text); } catch { return; }
    if (frame.type === "envelope") {
      const envelope = frame as unknown as EnvelopeFrame;
      this.queue = this.queue.then(async () => {
        try { await this.handlers.onEnvelope(envelope); } catch { /* reported by the handler; acknowledged all the same */ }
        if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: "ack", envelope_ids: [envelope.envelope_id] }));
      });
    } else if (frame.type === "security_alert") {
      void this.handlers.onSecurityAlert?.(frame as unknown as SecurityAlertFrame);
    } else if (frame.type === "sent") {
      this.pending.shift()?.resolve({ envelope_id: String(frame.envelope_id) });
    } else if (frame.type === "error") {
      this.pending.shift()?.reject(new Error(`${frame.status} ${frame.code}: ${frame.error}`));
    }
  }
}
