"""An identity agent in a few lines: open and verify what users send, answer them sealed and signed,
over webhooks (a small HTTP server verifying Standard Webhooks) or the WebSocket.

    agent = IdentityAgent(Credentials.load("agent.json"), on_message=lambda m: f"echo: {m.text}")
    asyncio.run(agent.run_websocket())        # or: agent.serve_webhooks(port=8787)

A returned string (or body dict) answers the user, sealed to their current key and signed by the
agent. Users' keys are read from the platform (only users with a relation to this agent) and
cached; an unknown key id is read again (the user rotated). Refused envelopes are logged and
never answered.
"""

from __future__ import annotations

import asyncio
import base64
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agents_identity.client import ApiError, IdentityClient
from agents_identity.envelope import EnvelopeError, Opened, Party, Receiver, ReplayWindow, SignerKey, seal, text_body
from agents_identity.keys import Credentials
from agents_identity.webhooks import WebhookVerificationError, verify_webhook
from agents_identity.ws import AgentSocket


@dataclass(frozen=True)
class IncomingMessage:
    """A verified message from a user: the opened envelope, who sent it and the platform's envelope id."""

    opened: Opened
    user_id: str
    envelope_id: str

    @property
    def text(self) -> str:
        return self.opened.text


Answer = str | dict | None


class IdentityAgent:
    """See module doc. `on_message(IncomingMessage) -> str | dict | None`; `on_security_alert(dict)`;
    `on_refused(EnvelopeError, envelope_id, user_id)`; `log(line)` (default: print)."""

    def __init__(self, credentials: Credentials, *, on_message: Callable[[IncomingMessage], Answer],
                 on_security_alert: Callable[[dict], None] | None = None,
                 on_refused: Callable[[Exception, str, str], None] | None = None,
                 log: Callable[[str], None] = print, replay: ReplayWindow | None = None) -> None:
        self.credentials = credentials
        self.client = IdentityClient(credentials)
        self.me = Party("agent", credentials.agent_id)
        self.on_message, self.on_security_alert, self.on_refused, self.log = on_message, on_security_alert, on_refused, log
        self.receiver = Receiver(me=self.me, private_keys=credentials.keys.decryption_keys(), signer=self._signer,
                                 replay=replay or ReplayWindow())
        self._user_keys: dict[str, list[dict]] = {}
        self._lock = threading.Lock()
        self.socket: AgentSocket | None = None

    def _keys_of(self, user_id: str, *, refresh: bool) -> list[dict]:
        with self._lock:
            cached = self._user_keys.get(user_id)
        if refresh or cached is None:
            cached = self.client.user_keys(user_id)
            with self._lock:
                self._user_keys[user_id] = cached
        return cached

    def _signer(self, sender: Party, skid: str) -> SignerKey | None:
        if sender.type != "user":
            return None
        for refresh in (False, True):
            for keys in self._keys_of(sender.id, refresh=refresh):
                if keys["signing_kid"] == skid:
                    return SignerKey(Ed25519PublicKey.from_public_bytes(base64.b64decode(keys["signing_public_key"])), keys["status"])
        return None

    def register_keys(self) -> dict:
        """Register this agent's public keys (and webhook secret) with its token."""
        return self.client.register_keys()

    def seal_for(self, user_id: str, answer: str | dict, *, reply_to: str | None = None) -> str:
        """Seal `answer` (text or a body dict) to `user_id`'s current key, signed by this agent."""
        current = [k for k in self._keys_of(user_id, refresh=True) if k["status"] == "current"]
        if not current:
            raise ApiError(404, {"code": "no_key", "error": f"user {user_id} has no current key to seal to"})
        body = text_body(answer, reply_to=reply_to) if isinstance(answer, str) else answer
        return seal(body=body, sender=self.me, recipient=Party("user", user_id), recipient_key=base64.b64decode(current[0]["public_key"]),
                    signing_key=self.credentials.keys.ed25519)

    def send_to_user(self, user_id: str, answer: str | dict, *, reply_to: str | None = None) -> str:
        """Send `user_id` a message over HTTP; return the envelope id."""
        return self.client.send_to_user(user_id, self.seal_for(user_id, answer, reply_to=reply_to))["envelope_id"]

    def open(self, *, envelope_id: str, user_id: str, envelope: str) -> tuple[IncomingMessage, Answer] | None:
        """Open and verify one delivered envelope and ask `on_message`; return `(message, answer)`, or None when refused."""
        try:
            opened = self.receiver.open(envelope, sender=Party("user", user_id))
        except (EnvelopeError, ApiError) as exc:
            self.log(f"refused envelope {envelope_id} from {user_id}: {exc}")
            if self.on_refused:
                self.on_refused(exc, envelope_id, user_id)
            return None
        self.log(f"opened envelope {envelope_id} from {user_id}: signed by key {opened.signer_kid}")
        message = IncomingMessage(opened=opened, user_id=user_id, envelope_id=envelope_id)
        return message, self.on_message(message)

    def handle(self, *, envelope_id: str, user_id: str, envelope: str) -> Opened | None:
        """Open, verify and answer (over HTTP) one delivered envelope; return what opened, or None."""
        result = self.open(envelope_id=envelope_id, user_id=user_id, envelope=envelope)
        if result is None:
            return None
        message, answer = result
        if answer is not None:
            self.send_to_user(user_id, answer, reply_to=message.opened.mid)
        return message.opened

    def _alert(self, alert: dict) -> None:
        self.log(f"security_alert {alert.get('code')}: {alert.get('data')}")
        if self.on_security_alert:
            self.on_security_alert(alert)

    # ---- WebSocket mode ----

    async def run_websocket(self) -> int | None:
        """Connect to `<base_url>/v1/identity/ws` and serve until the token is refused or revoked; return the close code."""
        url = self.credentials.base_url.replace("http", "ws", 1) + "/v1/identity/ws"

        async def on_envelope(frame: dict) -> None:
            result = await asyncio.to_thread(self.open, envelope_id=frame["envelope_id"], user_id=frame["user_id"], envelope=frame["envelope"])
            if result is None or result[1] is None:
                return
            message, answer = result
            sealed = await asyncio.to_thread(self.seal_for, message.user_id, answer, reply_to=message.opened.mid)
            await self.socket.send(message.user_id, sealed)

        self.socket = AgentSocket(url, self.credentials.agent_token, on_envelope=on_envelope, on_security_alert=self._alert,
                                  on_open=lambda: self.log("connected"))
        code = await self.socket.run()
        self.log(f"socket closed for good ({code})")
        return code

    # ---- webhook mode ----

    def webhook_server(self, *, host: str = "127.0.0.1", port: int = 8787) -> ThreadingHTTPServer:
        """Return an HTTP server (not started) whose POSTs are verified deliveries: 400 when one does
        not verify, 204 once handled (a refused envelope too: it will never open), 500 to be retried."""
        secret = self.credentials.webhook_secret
        if not secret:
            raise ValueError("webhook mode needs the webhook_secret the agent registered")
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # the agent logs what matters
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                try:
                    event = verify_webhook(body, dict(self.headers.items()), secret)
                except WebhookVerificationError as exc:
                    agent.log(str(exc))
                    self.send_response(400)
                    self.end_headers()
                    return
                try:
                    if event.get("type") == "envelope.created":
                        data = event["data"]
                        agent.handle(envelope_id=data["envelope_id"], user_id=data["user_id"], envelope=data["envelope"])
                    elif event.get("type") == "security_alert":
                        agent._alert(event)
                    self.send_response(204)
                except Exception as exc:  # noqa: BLE001 - the platform retries
                    agent.log(f"delivery failed: {exc}")
                    self.send_response(500)
                self.end_headers()

        return ThreadingHTTPServer((host, port), Handler)

    def serve_webhooks(self, *, host: str = "127.0.0.1", port: int = 8787) -> None:
        """Serve webhook deliveries on `host:port` until interrupted."""
        server = self.webhook_server(host=host, port=port)
        self.log(f"listening for webhooks on {host}:{server.server_address[1]}")
        try:
            server.serve_forever()
        finally:
            server.server_close()
