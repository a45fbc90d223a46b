"""The scale-out shape end to end: daphne with the default and org databases on PostgreSQL, pooled.

64 simultaneous appends on one process were 26 × 500 ("too many clients": one connection per
request per database, no pool). With small per-process pools every one is served, the seq is
dense, and the process never holds more connections than its pools allow.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import uuid

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.support.live import ROOT, LiveServer, server_env

SERVER = "postgres://postgres@127.0.0.1:5432/postgres"
DEFAULT_POOL, ORG_POOL = 4, 4
POOL_TIMEOUT = 5  # seconds a request waits for a pooled connection (generous for a loaded CI box)

_SETUP_ORG = """
import django
django.setup()
from tenancy.services import api_key_create, membership_set, org_create
org = org_create(slug={slug!r}, name={slug!r})
membership = membership_set(org=org, username="live-" + {slug!r}, password="pw", is_admin=True)
print(api_key_create(org=org, user=membership.user)[1])
"""


_OVERRIDES = ("DATABASE_URL", "AGENTS_ORG_DATABASE", "AGENTS_DB_POOL_MAX_SIZE", "AGENTS_ORG_DB_POOL_MAX_SIZE", "AGENTS_DB_POOL_TIMEOUT_SECONDS")


def _drop(*names: str) -> None:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def postgres_deployment(db):
    """A daphne whose default and org databases are on 127.0.0.1:5432; yields (server, key, org dbname)."""
    suffix = uuid.uuid4().hex[:8]
    default_db, slug = f"agents_test_default_{suffix}", f"live-{suffix}"
    org_db = f"agents_org_{slug}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(default_db)))
    env = server_env(
        {
            "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{default_db}",
            "AGENTS_ORG_DATABASE": "postgres",
            "AGENTS_DB_POOL_MAX_SIZE": DEFAULT_POOL,
            "AGENTS_ORG_DB_POOL_MAX_SIZE": ORG_POOL,
            "AGENTS_DB_POOL_TIMEOUT_SECONDS": POOL_TIMEOUT,
        }
    )
    server = None
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True)
        key = subprocess.run(
            [sys.executable, "-c", _SETUP_ORG.format(slug=slug)], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        ).stdout.strip().splitlines()[-1]
        server = LiveServer({k: env[k] for k in _OVERRIDES})
        server.start()
        yield server, key, (default_db, org_db)
    finally:
        if server is not None:
            server.stop()
        _drop(default_db, org_db)


def _connections_to(names: tuple[str, ...]) -> int:
    with psycopg.connect(SERVER) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE datname = ANY(%s) AND pid <> pg_backend_pid()"
        return conn.execute(query, (list(names),)).fetchone()[0]


def test_64_simultaneous_appends_on_postgres_mode_are_all_served_with_a_dense_seq(postgres_deployment):
    server, key, databases = postgres_deployment
    headers = {"Authorization": f"Bearer {key}"}
    opened = httpx.post(server.url + "/v1/agents/sessions", json={"agent": "coder"}, headers=headers, timeout=30)
    assert opened.status_code == 201, opened.text
    session_id = opened.json()["id"]
    clients = 64
    barrier = threading.Barrier(clients)
    answers: list[tuple[int, dict]] = []

    def append(i: int) -> None:
        with httpx.Client(headers=headers, timeout=60) as client:
            barrier.wait()
            response = client.post(f"{server.url}/v1/agents/sessions/{session_id}/events", json={"kind": "message", "payload": {"text": f"turn {i}"}})
            answers.append((response.status_code, response.json()))

    threads = [threading.Thread(target=append, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(status for status, _ in answers) == [201] * clients, [body for status, body in answers if status != 201][:3]
    assert sorted(body["seq"] for _, body in answers) == list(range(1, clients + 1))
    events = httpx.get(f"{server.url}/v1/agents/sessions/{session_id}", headers=headers, timeout=30).json()
    assert events["events"] == clients
    # The process holds no more connections than its two pools allow (the second is one org's).
    assert _connections_to(databases) <= DEFAULT_POOL + ORG_POOL


def test_open_streams_do_not_hold_pooled_connections(postgres_deployment):
    # A stream lasts as long as its client stays; a connection it kept for that long would
    # starve the pool, and requests behind it would wait, then answer 503 store_busy.
    server, key, _ = postgres_deployment
    headers = {"Authorization": f"Bearer {key}"}
    opened = httpx.post(server.url + "/v1/agents/sessions", json={"agent": "coder"}, headers=headers, timeout=30)
    assert opened.status_code == 201, opened.text
    session_id = opened.json()["id"]
    with contextlib.ExitStack() as streams:
        for _ in range(DEFAULT_POOL + ORG_POOL + 2):
            client = streams.enter_context(httpx.Client(headers=headers, timeout=httpx.Timeout(30, read=None)))
            response = streams.enter_context(client.stream("GET", f"{server.url}/v1/agents/sessions/stream"))
            assert response.status_code == 200
        appended = httpx.post(
            f"{server.url}/v1/agents/sessions/{session_id}/events", json={"kind": "message"}, headers=headers, timeout=60
        )
        assert appended.status_code == 201, appended.text


def test_256_simultaneous_appends_across_two_processes_are_all_served_with_a_dense_seq(postgres_deployment):
    # Two daphne processes on one org's database: every append answered 201 (none 5xx, none
    # 503 from a pool that waits long enough), and the session's seq is 1..256 with no gap or repeat.
    import asyncio

    first, key, _ = postgres_deployment
    second = LiveServer({k: first.env[k] for k in _OVERRIDES})
    second.start()
    try:
        headers = {"Authorization": f"Bearer {key}"}
        opened = httpx.post(first.url + "/v1/agents/sessions", json={"agent": "coder"}, headers=headers, timeout=30)
        assert opened.status_code == 201, opened.text
        session_id = opened.json()["id"]

        async def burst() -> list[httpx.Response]:
            limits = httpx.Limits(max_connections=256, max_keepalive_connections=0)
            async with httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as client:
                return await asyncio.gather(
                    *(
                        client.post(f"{server.url}/v1/agents/sessions/{session_id}/events", json={"kind": "message", "payload": {"n": i}})
                        for i, server in ((i, (first, second)[i % 2]) for i in range(256))
                    )
                )

        answers = asyncio.run(burst())
        assert sorted(r.status_code for r in answers) == [201] * 256, [r.text for r in answers if r.status_code != 201][:3]
        assert sorted(r.json()["seq"] for r in answers) == list(range(1, 257))
    finally:
        second.stop()
