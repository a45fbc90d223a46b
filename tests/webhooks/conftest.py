"""Fixtures of the webhook tests: a verifying receiver (Standard Webhooks), org endpoints made
through the API, the engine's clock moved by hand."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.agents.conftest import fast_policy, fund, make_agent  # noqa: F401  (fixture and helpers re-used)
from tests.identity.conftest import Receiver, sync_tasks  # noqa: F401
from webhooks import engine


@pytest.fixture
def receiver(settings):
    """A running loopback receiver that verifies each request with `standardwebhooks`; 127.0.0.1 is allow-listed."""
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    server = Receiver().start()
    yield server
    server.stop()


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
