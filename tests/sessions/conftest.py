"""Fixtures of the sessions tests: JSON helpers, the bus backends, Redis, live daphne servers."""

from __future__ import annotations

import json
import os
import uuid

import pytest
import redis

from agents_site.settings import redis_channel_layer
from sessions.bus import reset_bus

# A Redis database of its own, so these tests never meet another suite's keys.
REDIS_URL = os.environ.get("AGENTS_TEST_REDIS_URL", "redis://127.0.0.1:6379/3")


def post(client, path: str, body=None, **extra):
    """POST `body` as JSON (a str is sent as is) and return the response."""
    data = body if isinstance(body, (str, bytes)) else json.dumps(body if body is not None else {})
    return client.post(path, data, content_type="application/json", **extra)


def patch(client, path: str, body, **extra):
    """PATCH `body` as JSON and return the response."""
    return client.patch(path, json.dumps(body), content_type="application/json", **extra)


def new_session(org, **body) -> dict:
    """Open a session in `org` over HTTP and return its view (asserts 201)."""
    body.setdefault("agent", "coder")
    response = post(org.client, "/v1/agents/sessions", body)
    assert response.status_code == 201, response.content
    return response.json()


def append(org, session_id: str, kind: str = "message", payload=None, **extra) -> dict:
    """Append an event over HTTP and return its view (asserts 201)."""
    body = {"kind": kind, **extra}
    if payload is not None:
        body["payload"] = payload
    response = post(org.client, f"/v1/agents/sessions/{session_id}/events", body)
    assert response.status_code == 201, response.content
    return response.json()


@pytest.fixture(autouse=True)
def fresh_bus():
    """Give each test a bus built from its own settings, and close it after."""
    reset_bus()
    yield
    reset_bus()


@pytest.fixture(params=["channels", "local"])
def bus_backend(request, settings):
    """Run the test once per bus backend (the in-memory channel layer, and in-process)."""
    settings.AGENTS_SESSION_BUS = request.param
    reset_bus()
    return request.param


@pytest.fixture
def redis_url() -> str:
    """The test Redis database URL (the server on 127.0.0.1:6379 must answer)."""
    redis.Redis.from_url(REDIS_URL).ping()
    return REDIS_URL


@pytest.fixture
def redis_layer(settings, redis_url):
    """Point this process's channel layer (and bus) at Redis."""
    settings.CHANNEL_LAYERS = {"default": redis_channel_layer(redis_url)}  # the scale-out mode's layer
    settings.AGENTS_SESSION_BUS = "channels"
    reset_bus()
    return redis_url


def unique(prefix: str = "x") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def live_servers(transactional_db):
    """Start real daphne processes: `live_servers(env) -> LiveServer`; all stopped after the test."""
    from tests.support.live import LiveServer

    started = []

    def start(env: dict | None = None):
        server = LiveServer({"AGENTS_SSE_PING_SECONDS": "0.5", "AGENTS_SSE_CATCHUP_SECONDS": "0.3", **(env or {})}).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def _shared_daphne(django_db_setup):
    from tests.support.live import LiveServer

    server = LiveServer({"AGENTS_SSE_PING_SECONDS": "0.1", "AGENTS_SSE_CATCHUP_SECONDS": "0.3"}).start()
    yield server
    server.stop()


@pytest.fixture
def daphne(_shared_daphne, transactional_db):
    """One daphne process for the run (in-memory channel layer; ping 0.1 s, store catch-up 0.3 s)."""
    return _shared_daphne


@pytest.fixture(scope="session")
def _redis_daphnes(django_db_setup):
    from tests.support.live import LiveServer

    redis.Redis.from_url(REDIS_URL).ping()
    env = {"REDIS_URL": REDIS_URL, "AGENTS_SSE_PING_SECONDS": "0.2", "AGENTS_SSE_CATCHUP_SECONDS": "60"}
    servers = [LiveServer(env).start(), LiveServer(env).start()]
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture
def redis_daphnes(_redis_daphnes, transactional_db, redis_layer):
    """Two daphne processes sharing Redis (no store catch-up: only the bus brings frames)."""
    return _redis_daphnes


PG_SERVER = "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def postgres_org(settings, monkeypatch, make_org):
    """An org whose store is a PostgreSQL database on 127.0.0.1:5432, whatever the pass; dropped after."""
    import psycopg
    from django.db import connections
    from psycopg import sql

    from tenancy import stores

    settings.AGENTS_ORG_DATABASE = "postgres"
    monkeypatch.setenv("DATABASE_URL", PG_SERVER)
    org = make_org("pgs")
    yield org
    for alias in list(connections):
        if alias.endswith(org.slug):
            connections[alias].close()
    stores.close_store(org.slug)  # its pool too
    with psycopg.connect(PG_SERVER, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(stores.postgres_database_name(org.slug))))
