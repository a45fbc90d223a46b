/**
 * An identity agent in a few lines: open and verify what users send, answer them sealed and signed,
 * over webhooks (an HTTP server verifying Standard Webhooks) or the WebSocket.
 *
 *   const agent = new IdentityAgent(await loadCredentials("agent.json"), {
 *     onMessage: (m) => `echo: ${m.text}`,          // a string answers the user
 *   });
 *   await agent.connect();                           // WebSocket mode, or: agent.listen(8787)
 *
 * Users' signing keys are fetched from the platform (only users with a relation to this agent)
 * and cached by key id; a key id not cached is fetched again (a user who rotated keys).
 */
import http from "node:http";

import { ApiError, IdentityClient, type PublicKeys } from "./client.js";
import type { Credentials } from "./credentials.js";
import { EnvelopeError, Receiver, ReplayWindow, fromBase64, seal, textBody, type Opened, type Party, type SignerKey } from "./envelope.js";
import { verifyWebhook, WebhookVerificationError } from "./webhooks.js";
import { AgentSocket, type SecurityAlertFrame } from "./ws.js";

export interface IncomingMessage extends Opened { userId: string; envelopeId: string }
export interface AgentHandlers {
  /** A verified message; return a string (or a body object) to answer the user, or nothing. */
  onMessage(message: IncomingMessage): Promise<string | Record<string, unknown> | void> | string | Record<string, unknown> | void;
  /** A `security_alert` (agent.token_rotated, agent.token_revoked, …). */
  onSecurityAlert?(alert: { code: string; data: Record<string, unknown> }): void;
  /** An envelope that was refused (it is acknowledged and never answered). */
  onRefused?(error: EnvelopeError | Error, context: { userId: string; envelopeId: string }): void;
  log?(line: string): void;
}

export class IdentityAgent {
  readonly client: IdentityClient;
  readonly receiver: Receiver;
  readonly me: Party;
  private userKeys = new Map<string, PublicKeys[]>();
  private socket: AgentSocket | null = null;

  constructor(readonly credentials: Credentials, readonly handlers: AgentHandlers, replay = new ReplayWindow()) {
    this.client = new IdentityClient(credentials);
    this.me = { type: "agent", id: credentials.agentId };
    this.receiver = new Receiver({ me: this.me, keys: credentials.keys.decryptionKeys(), signer: (s, skid) => this.signerKey(s, skid), replay });
  }

  private log(line: string): void { (this.handlers.log ?? ((l: string) => console.log(l)))(line); }

  private async keysOf(userId: string, refresh: boolean): Promise<PublicKeys[]> {
    if (refresh || !this.userKeys.has(userId)) this.userKeys.set(userId, await this.client.userKeys(userId));
    return this.userKeys.get(userId)!;
  }

  private async signerKey(sender: Party, skid: string): Promise<SignerKey | null> {
    if (sender.type !== "user") return null;
    let found = (await this.keysOf(sender.id, false)).find((k) => k.signing_kid === skid);
    if (!found) found = (await this.keysOf(sender.id, true)).find((k) => k.signing_kid === skid);
    return found ? { publicKey: fromBase64(found.signing_public_key), status: found.status } : null;
  }

  /** Register this agent's public keys (and webhook secret) with its token. */
  registerKeys(): Promise<PublicKeys> { return this.client.registerKeys(this.credentials.keys, this.credentials.webhookSecret); }

  /** Seal `body` (or text) to `userId`'s current key, signed by this agent; resolve the envelope. */
  async sealFor(userId: string, body: string | Record<string, unknown>, replyTo?: string): Promise<string> {
    const keys = await this.keysOf(userId, true);
    const current = keys.find((k) => k.status === "current");
    if (!current) throw new Error(`user ${userId} has no current key to seal to`);
    const { ed25519 } = this.credentials.keys;
    return seal({ body: typeof body === "string" ? textBody(body, replyTo) : body, sender: this.me, recipient: { type: "user", id: userId },
      recipientPublicKey: fromBase64(current.public_key), signingKey: ed25519.privateKey, signingPublicKey: ed25519.publicKey });
  }

  /** Send a user a message: over the socket when connected, else over HTTP; resolves the envelope id. */
  async sendToUser(userId: string, body: string | Record<string, unknown>, replyTo?: string): Promise<string> {
    const envelope = await this.sealFor(userId, body, replyTo);
    if (this.socket) {
      try { return (await this.socket.send(userId, envelope)).envelope_id; } catch (err) { this.log(`socket send failed (${(err as Error).message}); sending over HTTP`); }
    }
    return (await this.client.sendToUser(userId, envelope)).envelope_id;
  }

  /** Open, verify and answer one delivered envelope; resolves what opened, or null when it was refused. */
  async handleEnvelope(d: { envelopeId: string; userId: string; envelope: string }): Promise<Opened | null> {
    let opened: Opened;
    try {
      opened = await this.receiver.open(d.envelope, { sender: { type: "user", id: d.userId } });
    } catch (err) {
      if (err instanceof EnvelopeError || err instanceof ApiError) {
        this.log(`refused envelope ${d.envelopeId} from ${d.userId}: ${(err as Error).message}`);
        this.handlers.onRefused?.(err as Error, d);
        return null;
      }
      throw err;
    }
    this.log(`opened envelope ${d.envelopeId} from ${d.userId}: signed by key ${opened.signerKid}`);
    const answer = await this.handlers.onMessage({ ...opened, userId: d.userId, envelopeId: d.envelopeId });
    if (answer !== undefined && answer !== null) await this.sendToUser(d.userId, answer as string | Record<string, unknown>, opened.mid);
    return opened;
  }

  private alert(a: { code: string; data: Record<string, unknown> }): void {
    this.log(`security_alert ${a.code}: ${JSON.stringify(a.data)}`);
    this.handlers.onSecurityAlert?.(a);
  }

  /** WebSocket mode: connect to `<base_url>/v1/identity/ws`; resolves once connected (reconnects after drops). */
  async connect(): Promise<AgentSocket> {
    const url = this.credentials.baseUrl.replace(/^http/, "ws") + "/v1/identity/ws";
    this.socket = new AgentSocket(url, this.credentials.agentToken, {
      onEnvelope: (f) => this.handleEnvelope({ envelopeId: f.envelope_id, userId: f.user_id, envelope: f.envelope }).then(() => undefined),
      onSecurityAlert: (a: SecurityAlertFrame) => this.alert(a),
      onOpen: () => this.log("connected"),
      onClose: (code, final) => this.log(final ? `socket closed for good (${code})` : `socket closed (${code}); reconnecting`),
    });
    await this.socket.start();
    return this.socket;
  }

  /** The webhook handler: verify the delivery (400 when it does not verify), handle it, answer 204. */
  webhookHandler(): http.RequestListener {
    const secret = this.credentials.webhookSecret;
    if (!secret) throw new Error("webhook mode needs the webhook_secret the agent registered");
    return (req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", async () => {
        let event;
        try {
          event = verifyWebhook(Buffer.concat(chunks), req.headers, secret);
        } catch (err) {
          this.log(String((err as WebhookVerificationError).message));
          res.writeHead(400).end();
          return;
        }
        try {
          if (event.type === "envelope.created") {
            const data = (event as { data: { envelope_id: string; user_id: string; envelope: string } }).data;
            await this.handleEnvelope({ envelopeId: data.envelope_id, userId: data.user_id, envelope: data.envelope });
          } else if (event.type === "security_alert") {
            this.alert(event as { code: string; data: Record<string, unknown> });
          }
          res.writeHead(204).end();
        } catch (err) {
          this.log(`delivery failed: ${(err as Error).message}`);
          res.writeHead(500).end();  // the platform retries
        }
      });
    };
  }

  /** Webhook mode: serve the webhook handler on `port` (any path); resolves the listening server. */
  listen(port: number, host = "127.0.0.1"): Promise<http.Server> {
    const server = http.createServer(this.webhookHandler());
    return new Promise((resolve) => server.listen(port, host, () => resolve(server)));
  }

  /** Stop the socket (webhook servers are closed by their owner). */
  close(): void { this.socket?.stop(); this.socket = null; }
}
