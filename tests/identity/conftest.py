"""Fixtures of the identity tests: a real loopback webhook receiver, real keys, helpers."""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from standardwebhooks import Webhook


def raw_public(private_key) -> str:
    """Return the base64 of a private key's raw 32-byte public key."""
    return base64.b64encode(private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


@dataclass
class AgentKeys:
    """A real X25519 + Ed25519 key pair and a Standard Webhooks secret, as an agent holds them."""

    x25519: X25519PrivateKey = field(default_factory=X25519PrivateKey.generate)
    ed25519: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    webhook_secret: str = field(default_factory=lambda: "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode())

    def body(self, *, webhook: bool) -> dict:
        data = {"public_key": raw_public(self.x25519), "signing_public_key": raw_public(self.ed25519)}
        if webhook:
            data["webhook_secret"] = self.webhook_secret
        return data


@pytest.fixture
def agent_keys() -> AgentKeys:
    return AgentKeys()


@dataclass
class Received:
    headers: dict
    body: bytes
    verified: dict | None
    error: str | None


class Receiver:
    """A loopback HTTP server standing in for an agent's webhook endpoint.

    `mode`: "ok" (204), "fail" (500), "redirect" (307 elsewhere), "slow" (answers after
    `slow_seconds`). Each request is verified with the `standardwebhooks` library against
    `secret` (when set) and recorded in `received`.
    """

    def __init__(self) -> None:
        self.mode = "ok"
        self.secret: str | None = None
        self.slow_seconds = 2.0
        self.received: list[Received] = []
        self.health_status = 200
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # health probe
                self.send_response(receiver.health_status)
                self.end_headers()

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                verified, error = None, None
                if receiver.secret:
                    try:
                        verified = Webhook(receiver.secret).verify(body, headers)
                    except Exception as exc:  # noqa: BLE001 - recorded for the test to assert on
                        error = f"{type(exc).__name__}: {exc}"
                receiver.received.append(Received(headers, body, verified, error))
                if receiver.mode == "slow":
                    time.sleep(receiver.slow_seconds)  # a receiver slow on purpose (the behaviour under test), not a wait
                if receiver.mode == "fail":
                    self.send_response(500)
                elif receiver.mode == "redirect":
                    self.send_response(307)
                    self.send_header("Location", "http://127.0.0.1:9/elsewhere")
                else:
                    self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings):
    """A running loopback webhook receiver; 127.0.0.1 is allow-listed for this test."""
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def sync_tasks(monkeypatch):
    """Run django-q2 tasks inline (the task engine's own sync mode) for this test."""
    from django_q.conf import Conf

    monkeypatch.setattr(Conf, "SYNC", True)


def create_agent(client, **fields):
    """POST /v1/identity/agents with defaults; return the response."""
    body = {"display_name": "Helper", "connection_mode": "websocket", **fields}
    return client.post("/v1/identity/agents", json.dumps(body), content_type="application/json")


def post(client, path, body=None, **headers):
    return client.post(path, json.dumps(body if body is not None else {}), content_type="application/json", **headers)


def patch(client, path, body, **headers):
    return client.patch(path, json.dumps(body), content_type="application/json", **headers)


def bearer(token: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def random_bytes_b64(size: int = 64) -> str:
    """Base64 of random bytes: what an envelope looked like before v1 (now refused)."""
    return base64.b64encode(secrets.token_bytes(size)).decode()


def seal(*, sender: tuple[str, str], recipient: tuple[str, str], sender_keys: AgentKeys, recipient_keys: AgentKeys, text: str = "hello", **kw) -> str:
    """Return a real v1 envelope (sdk/python) from `sender` to `recipient` (`("user"|"agent", id)`)."""
    from agents_identity.envelope import Party, seal as sdk_seal, text_body

    return sdk_seal(body=text_body(text), sender=Party(*sender), recipient=Party(*recipient),
                    recipient_key=recipient_keys.x25519.public_key(), signing_key=sender_keys.ed25519, **kw)


def put_user_keys(client, keys: AgentKeys):
    """PUT /v1/identity/users/me/keys with `keys`' public halves; return the response."""
    return client.put("/v1/identity/users/me/keys", json.dumps(keys.body(webhook=False)), content_type="application/json")


@dataclass
class Pair:
    """A user and an identity agent of one org, both with registered keys: they exchange v1 envelopes.

    `to_agent(text)` / `to_user(text)` seal one (a fresh message id each); `send_to_agent` /
    `send_to_user` also POST it (the user's client, the agent's token) and return the response.
    """

    client: object
    user_id: str
    agent: dict
    user_keys: AgentKeys
    agent_keys: AgentKeys

    @property
    def agent_id(self) -> str:
        return self.agent["agent_id"]

    def to_agent(self, text: str = "hello", **kw) -> str:
        return seal(sender=("user", self.user_id), recipient=("agent", self.agent_id), sender_keys=self.user_keys,
                    recipient_keys=self.agent_keys, text=text, **kw)

    def to_user(self, text: str = "hi", **kw) -> str:
        return seal(sender=("agent", self.agent_id), recipient=("user", self.user_id), sender_keys=self.agent_keys,
                    recipient_keys=self.user_keys, text=text, **kw)

    def send_to_agent(self, text: str = "hello", envelope: str | None = None):
        return post(self.client, f"/v1/identity/agents/{self.agent_id}/messages", {"envelope": envelope or self.to_agent(text)})

    def send_to_user(self, text: str = "hi", envelope: str | None = None):
        return post(self.client, f"/v1/identity/users/{self.user_id}/messages", {"envelope": envelope or self.to_user(text)},
                    **bearer(self.agent["agent_token"]))


def pair(client, user_id: str, agent: dict, *, webhook: bool = False, agent_keys: AgentKeys | None = None, user_keys: AgentKeys | None = None) -> Pair:
    """Register real keys for `agent` (with its token) and for the user of `client`; return the `Pair`."""
    agent_keys = agent_keys or AgentKeys()
    user_keys = user_keys or AgentKeys()
    registered = post(client, f"/v1/identity/agents/{agent['agent_id']}/keys/register", agent_keys.body(webhook=webhook), **bearer(agent["agent_token"]))
    assert registered.status_code == 200, registered.json()
    assert put_user_keys(client, user_keys).status_code in (200, 201)
    return Pair(client=client, user_id=user_id, agent=agent, user_keys=user_keys, agent_keys=agent_keys)
