"""Fixtures of the webhook tests: a verifying receiver (Standard Webhooks), org endpoints made
through the API, the engine's clock moved by hand."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.utils import timezone

from tests.agents.conftest import fast_policy, fund, make_agent  # noqa: F401  (fixture and helpers re-used)
from standardwebhooks import Webhook

from tests.identity.conftest import sync_tasks  # noqa: F401
from webhooks import engine


@dataclass
class Got:
    path: str
    headers: dict
    body: bytes
    verified: dict | None
    error: str | None
    peer: int = 0  # the client's port: requests on one kept connection share it


class Receiver:
    """A loopback HTTP server standing in for a customer's webhook endpoint.

    Each POST is verified with the `standardwebhooks` library against `secret` and recorded in
    `received` (with its path). `mode`: "ok" (204), "down" (503, recorded in `refused`),
    "slow" (answers after `slow_seconds`), "body" (500 with `answer` as its body), "gone" (410), "hold" (answers
    204 once `release` is set). `max_active` is the most requests it held open at once.
    `keep_alive`: speak HTTP/1.1 and keep each connection open between requests (else HTTP/1.0:
    one request per connection).
    """

    def __init__(self, *, keep_alive: bool = False) -> None:
        self.mode = "ok"
        self.secret: str | None = None
        self.slow_seconds = 2.0
        self.answer = b""
        self.received: list[Got] = []
        self.refused = 0
        self.release = threading.Event()
        self.active = 0
        self.max_active = 0
        self._count_lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_POST(self):
                with receiver._count_lock:
                    receiver.active += 1
                    receiver.max_active = max(receiver.max_active, receiver.active)
                try:
                    self._answer()
                finally:
                    with receiver._count_lock:
                        receiver.active -= 1

            def _answer(self):
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if receiver.mode == "down":
                    receiver.refused += 1
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if receiver.mode == "gone":
                    self.send_response(410)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if receiver.mode == "body":
                    self.send_response(500)
                    self.send_header("Content-Length", str(len(receiver.answer)))
                    self.end_headers()
                    self.wfile.write(receiver.answer)
                    return
                headers = {k.lower(): v for k, v in self.headers.items()}
                verified, error = None, None
                try:
                    verified = Webhook(receiver.secret).verify(body, headers)
                except Exception as exc:  # noqa: BLE001 - recorded for the test to assert on
                    error = f"{type(exc).__name__}: {exc}"
                receiver.received.append(Got(self.path, headers, body, verified, error, self.client_address[1]))
                if receiver.mode == "slow":
                    time.sleep(receiver.slow_seconds)  # a receiver slow on purpose (the behaviour under test), not a wait
                if receiver.mode == "hold":
                    receiver.release.wait(60)
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = keep_alive  # a kept connection's handler waits for a next request: never joined at the end
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> Receiver:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver(settings):
    """A running loopback receiver that verifies each request with `standardwebhooks`; 127.0.0.1 is allow-listed."""
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture
def second_receiver(receiver):
    """Another loopback receiver (another origin: its own port)."""
    server = Receiver().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _engine_reset():
    """Each test starts and ends with no queued attempt and no retry timer in this process."""
    engine.reset()
    yield
    engine.reset()


def post(client, path: str, body: dict | None = None):
    return client.post(path, json.dumps(body if body is not None else {}), content_type="application/json")


def patch(client, path: str, body: dict):
    return client.patch(path, json.dumps(body), content_type="application/json")


def create_endpoint(org, url: str, events=("run.finished",), **fields) -> dict:
    """POST /v1/agents/webhooks; return the created view with its secret (asserts 201)."""
    response = post(org.client, "/v1/agents/webhooks", {"url": url, "events": list(events), **fields})
    assert response.status_code == 201, response.content
    return response.json()


class Clock:
    """The engine's time, moved by hand (`advance(seconds)`)."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self):
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock():
    """Drive the engine's retry schedule without waiting: `clock.advance(seconds)`."""
    moved = Clock()
    engine.set_clock(moved)
    yield moved
    engine.set_clock(None)


def verified_types(receiver) -> list[str]:
    """Return the `type` of every request the receiver verified (asserting none failed verification)."""
    for got in receiver.received:
        assert got.error is None, got.error
    return [got.verified["type"] for got in receiver.received]


@pytest.fixture
def inline_delivery(monkeypatch):
    """Make each queued delivery task at once, in this thread (what a django-q2 worker does)."""
    monkeypatch.setattr(engine, "enqueue", lambda org, channel_name, ids: engine.dispatch(org, channel_name, list(ids)))
