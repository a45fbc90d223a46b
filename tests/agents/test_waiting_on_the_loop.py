"""Waiting on a model costs no thread and no connection (issue 26 item 1), on a real daphne.

Sync runs, streamed chat rounds and streamed OpenAI-compatible calls are started at once
against an upstream that sends the first piece of each streamed reply and then holds the rest
(a sync run's request, asked not streamed, the whole answer) until the test lets it go. While every one of them is waiting on its model: daphne runs a bounded number
of threads (one per waiting run before: 1 per sync run, 2 per stream), and on PostgreSQL none
of its connections is held — in a transaction or checked out — for a waiting run. Then every
one finishes `ok`, recorded and answered.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from tests.agents.conftest import fund
from tests.support.live import ROOT, LiveServer, server_env
from tests.support.upstream import Reply
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PER_KIND = 20
#: daphne's threads while 3 × PER_KIND runs wait: the request threads (AGENTS_REQUEST_THREADS,
#: kept idle for reuse), the run-step threads (AGENTS_RUN_STEP_THREADS), the bus, the revocation
#: listener and Twisted's own — bounded whatever the number of waiting runs.
THREAD_BOUND = 40


def threads_of(pid: int) -> int:
    """Return the number of threads of process `pid` (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError("no Threads line")


def held_replies(count: int, release: threading.Event) -> list[Reply]:
    """Replies that send "ab" at once and "cdef" only once `release` is set."""
    return [Reply(content="abcdef", chunk_size=2, pause_after=1, pause=release) for _ in range(count)]


def fire(base_url: str, key: str, kind: str, index: int, results: dict) -> None:
    """Make one request of `kind` (sync, chat, openai); record `(status, reply text)`."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=120) as client:
        if kind == "sync":
            response = client.post("/v1/agents/waiter/run", json={"input": f"hello {index}"})
            results[(kind, index)] = (response.status_code, response.json().get("output"))
            return
        if kind == "chat":
            body = {"agent": "waiter", "messages": [{"role": "user", "content": f"hello {index}"}], "stream": True}
            path = "/v1/agents/chat"
        else:
            body = {"model": "waiter", "messages": [{"role": "user", "content": f"hello {index}"}], "stream": True}
            path = "/v1/agents/openai/v1/chat/completions"
        with client.stream("POST", path, json=body) as response:
            text = response.read().decode()
        results[(kind, index)] = (response.status_code, _reply_of(kind, text))


def _reply_of(kind: str, text: str) -> str:
    """The reply a stream carried: the chat frame's `reply`, or the OpenAI chunks' content joined."""
    pieces = []
    for block in text.split("\n\n"):
        lines = block.splitlines()
        event = next((line[7:] for line in lines if line.startswith("event: ")), None)
        data = next((line[6:] for line in lines if line.startswith("data: ")), None)
        if data is None or data == "[DONE]":
            continue
        parsed = json.loads(data)
        if kind == "chat" and event == "chat":
            return parsed["reply"]
        if kind == "openai":
            for choice in parsed.get("choices") or []:
                pieces.append((choice.get("delta") or {}).get("content") or "")
    return "".join(pieces)


def load(server: LiveServer, key: str, upstream, *, per_kind: int, while_waiting) -> dict:
    """Fire `per_kind` requests of each kind at once; once every one is waiting on its model call
    `while_waiting()`, then let the replies finish; return the results by (kind, index)."""
    release = threading.Event()
    upstream.script(*held_replies(3 * per_kind, release))
    results: dict = {}
    workers = [threading.Thread(target=fire, args=(server.url, key, kind, i, results)) for kind in ("sync", "chat", "openai")
               for i in range(per_kind)]
    for worker in workers:
        worker.start()
    try:
        def waiting() -> int:  # streams that sent their first piece, and sync runs' requests (asked not streamed: decision 1534)
            return sum(1 for s in list(upstream.streams) if s.sent >= 1) + sum(1 for r in upstream.chat_requests if not r.get("stream"))

        try:
            wait_until(lambda: waiting() >= 3 * per_kind, timeout=120, what="every run to be waiting on its model")
        except AssertionError:
            count = waiting()
            raise AssertionError(f"{count} of {3 * per_kind} runs waiting; answered: {sorted(results.items())[:6]}; "
                                 f"log: {server.log_path.read_text()[-3000:]}") from None
        while_waiting()
    finally:
        release.set()
        for worker in workers:
            worker.join(120)
    return results


def assert_all_answered(results: dict, per_kind: int) -> None:
    assert len(results) == 3 * per_kind
    assert {status for status, _ in results.values()} == {200}, sorted(results.items())[:5]
    assert {reply for _, reply in results.values()} == {"abcdef"}


def test_runs_waiting_on_their_model_hold_no_thread_each(make_org, upstream):
    org = make_org("waits")
    fund(org, 100_000)
    server = LiveServer({"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "test-key",
                         "AGENTS_DEFAULT_MODEL": "test-model"}).start()
    try:
        headers = {"Authorization": f"Bearer {org.key}"}
        assert httpx.post(server.url + "/v1/agents", json={"name": "waiter"}, headers=headers, timeout=30).status_code == 201
        seen: dict = {}

        def measure() -> None:
            seen["threads"] = threads_of(server.proc.pid)

        results = load(server, org.key, upstream, per_kind=PER_KIND, while_waiting=measure)
    finally:
        server.stop()
    assert_all_answered(results, PER_KIND)
    # 60 runs waiting at once: a thread each (two per stream) would be ≥ 100.
    assert seen["threads"] <= THREAD_BOUND, seen
    from runs.models import Run
    from tenancy import stores

    with stores.org_context(org.slug):
        assert Run.objects.filter(status="ok").count() == 3 * PER_KIND


# -- PostgreSQL + Redis, the default pools ------------------------------------------------------------

SERVER = "postgres://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/7"

_SETUP_ORG = """
import django
django.setup()
from billing.services import credit_add
from tenancy.services import api_key_create, membership_set, org_create
org = org_create(slug={slug!r}, name={slug!r})
membership = membership_set(org=org, username="live-" + {slug!r}, password="pw", is_admin=True)
credit_add(org=org, cents=100000, actor="test")
print(api_key_create(org=org, user=membership.user)[1])
"""


def _drop(*names: str) -> None:
    with psycopg.connect(SERVER, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _server_connections(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """Return `(state, query)` of every connection to the databases `names` but this one."""
    with psycopg.connect(SERVER) as conn:
        rows = conn.execute("SELECT coalesce(state, ''), coalesce(query, '') FROM pg_stat_activity "
                            "WHERE datname = ANY(%s) AND pid <> pg_backend_pid()", (list(names),)).fetchall()
    return [(state, query) for state, query in rows]


def test_on_postgresql_with_the_default_pools_waiting_runs_hold_no_connection(db, upstream):
    suffix = uuid.uuid4().hex[:8]
    default_db, slug = f"agents_test_default_{suffix}", f"wait-{suffix}"
    org_db = f"agents_org_{slug}"
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(default_db)))
    env = server_env({"DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{default_db}", "AGENTS_ORG_DATABASE": "postgres",
                      "REDIS_URL": REDIS_URL})
    server = None
    try:
        subprocess.run([sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True)
        key = subprocess.run([sys.executable, "-c", _SETUP_ORG.format(slug=slug)], cwd=ROOT, env=env, check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
        overrides = ("DATABASE_URL", "AGENTS_ORG_DATABASE", "REDIS_URL")
        server = LiveServer({**{k: env[k] for k in overrides}, "INFERENCE_BASE_URL": upstream.base_url,
                             "INFERENCE_API_KEY": "test-key", "AGENTS_DEFAULT_MODEL": "test-model"}).start()
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.post(server.url + "/v1/agents", json={"name": "waiter"}, headers=headers, timeout=30).status_code == 201
        seen: dict = {}

        def measure() -> None:
            # Settled: every run's last step before its model call has handed its connections back.
            wait_until(lambda: not [c for c in _server_connections((default_db, org_db)) if c[0] != "idle"], timeout=30,
                       what="the server's connections to be idle while the runs wait")
            seen["connections"] = _server_connections((default_db, org_db))

        results = load(server, key, upstream, per_kind=PER_KIND, while_waiting=measure)
    finally:
        if server is not None:
            server.stop()
        with contextlib.suppress(Exception):
            _drop(default_db, org_db)
    assert_all_answered(results, PER_KIND)  # none 503 `store_busy`, none failed mid-stream
    states = [state for state, _ in seen["connections"]]
    assert "idle in transaction" not in states
    # The pools' bounds (10 default + 4 for the org), whatever the number of waiting runs (60 here).
    assert len(states) <= 10 + 4, seen["connections"]
