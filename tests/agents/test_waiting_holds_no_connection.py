"""A run waiting on its model holds no database connection (issue 26 item 1).

On PostgreSQL the pools are small (tests/settings.py: 4 for the default database, 4 per org
database): before, each waiting run kept one connection of each, so the fifth simultaneous run
waited for a free connection and was answered 503 `store_busy` — a sync run on its request's
thread, a streamed chat round on the request's thread *and* its worker's. Now more runs than the
pools hold wait on the model at once and all succeed. (On SQLite this passes either way; the
PostgreSQL pass of `make test` is the one that can fail.)
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from django.conf import settings
from django.db import connections
from django.test import Client

from agents_site.vocabulary import RunStatus
from tenancy import stores
from tests.agents.conftest import fund, make_agent, stored_runs
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def simultaneous() -> int:
    """More requests than either pool can hold at once (PostgreSQL; SQLite mode has no pool to exceed)."""
    if "postgresql" not in settings.DATABASES["default"]["ENGINE"]:
        return 4
    return max(settings.AGENTS_DB_POOL_MAX_SIZE, settings.AGENTS_ORG_DB_POOL_MAX_SIZE) + 2


def all_waiting(upstream, n: int, answers: list) -> None:
    """Return once `n` completions reached the upstream; fail if a request answered first or after 60 s."""
    deadline = time.monotonic() + 60
    while len(upstream.chat_requests) < n:
        assert not answers, f"a request answered before every run was waiting on the model: {answers[:1]}"
        assert time.monotonic() < deadline, f"only {len(upstream.chat_requests)} of {n} runs reached the model"
        time.sleep(0.01)


def read(response) -> str:
    """Return a streamed answer's whole text (its body is an async iterator)."""

    async def gather() -> bytes:
        return b"".join([c if isinstance(c, bytes) else c.encode() async for c in response.streaming_content])

    return asyncio.run(gather()).decode()


def fire(org, n: int, request) -> tuple[list, list[threading.Thread]]:
    """Start `n` threads each calling `request(client)` with its own client; return (answers, threads)."""
    answers: list = []

    def one():
        client = Client(HTTP_AUTHORIZATION=f"Bearer {org.key}")
        try:
            answers.append(request(client))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=one, daemon=True) for _ in range(n)]
    for thread in threads:
        thread.start()
    return answers, threads


def answered_after_all_waited(org, upstream, reply: str, request) -> list:
    """Hold `simultaneous()` model replies until every request is waiting on the model, then
    release them; return each request's `(status, body)` as `request(client)` read it."""
    n = simultaneous()
    fund(org, 100 * n)
    gate = threading.Event()
    upstream.script(*[Reply(content=reply, hold=gate) for _ in range(n)])
    answers, threads = fire(org, n, request)
    try:
        all_waiting(upstream, n, answers)
    finally:
        gate.set()
        for thread in threads:
            thread.join(60)
    assert [status for status, _ in answers] == [200] * n, answers
    runs = stored_runs(org)
    assert len(runs) == n and {run.status for run in runs} == {RunStatus.OK}  # every run recorded, none lost to a 503
    return answers


def test_more_sync_runs_waiting_on_the_model_than_the_pools_hold_all_succeed(funded, upstream):
    make_agent(funded, "waiter")

    def request(client):
        response = client.post("/v1/agents/waiter/run", {"input": "hi"}, content_type="application/json")
        return response.status_code, response.json()

    answers = answered_after_all_waited(funded, upstream, "done waiting", request)
    assert {body["output"] for _, body in answers} == {"done waiting"}


def test_more_streamed_chat_rounds_waiting_than_the_pools_hold_all_succeed(funded, upstream):
    make_agent(funded, "talker")

    def request(client):
        response = client.post("/v1/agents/chat", {"agent": "talker", "messages": [{"role": "user", "content": "hi"}], "stream": True},
                               content_type="application/json")
        return response.status_code, read(response) if response.status_code == 200 else response.content.decode()

    answers = answered_after_all_waited(funded, upstream, "streamed after the wait", request)
    assert all("event: error" not in body and "streamed after the wait" in body for _, body in answers), answers[0]


def test_release_hands_back_this_threads_connections_outside_a_transaction(funded):
    from agents.models import Agent

    seen = {}

    def work():
        with stores.org_context(funded.slug) as alias:
            Agent.objects.count()  # the org store's connection, opened
            connections["default"].ensure_connection()
            seen["released"] = stores.release_connections()
            seen["open after"] = [a for a in ("default", alias) if connections[a].connection is not None]
            with stores.org_atomic():
                Agent.objects.count()
                seen["released in a transaction"] = stores.release_connections()
                seen["org open in a transaction"] = connections[alias].connection is not None
        connections.close_all()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(30)
    assert seen == {"released": 2, "open after": [], "released in a transaction": 0, "org open in a transaction": True}
