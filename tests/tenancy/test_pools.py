"""Pooled PostgreSQL org connections: bounded per process, a wait absorbs bursts, overload is a 503.

Threads in this process stand for a server's concurrent requests: each holds its org connection
from first use until it closes its connections, as a request does until it ends.
"""

from __future__ import annotations

import json
import threading

import pytest
from django.db import connections

from sessions.models import Event
from tenancy import stores

pytestmark = pytest.mark.django_db(transaction=True)


def _pooled_org(make_org, postgres_orgs, settings, *, max_size: int, timeout: float):
    settings.AGENTS_ORG_DB_POOL_MAX_SIZE = max_size
    settings.AGENTS_DB_POOL_TIMEOUT_SECONDS = timeout
    org = make_org("pool")
    postgres_orgs.append(org.slug)
    connections.close_all()
    stores.close_store(org.slug)  # registered again from the settings above, with a fresh pool
    session = org.client.post("/v1/agents/sessions", json.dumps({"agent": "coder"}), content_type="application/json")
    assert session.status_code == 201, session.content
    connections.close_all()  # hand this thread's pooled connection back
    return org, session.json()["id"]


def _append(org, session_id: str, text: str):
    body = json.dumps({"kind": "message", "payload": {"text": text}})
    return org.client.post(f"/v1/agents/sessions/{session_id}/events", body, content_type="application/json")


def _pool_of(org):
    with org.context() as alias:
        return connections[alias].pool


def test_a_small_pool_serves_many_simultaneous_appends_with_a_dense_seq(postgres_orgs, make_org, settings):
    org, session_id = _pooled_org(make_org, postgres_orgs, settings, max_size=2, timeout=30)
    clients = 24
    barrier = threading.Barrier(clients)
    statuses: list[int] = []

    def append(i: int) -> None:
        try:
            barrier.wait()
            statuses.append(_append(org, session_id, f"turn {i}").status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=append, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert statuses == [201] * clients
    stats = _pool_of(org).get_stats()
    assert stats["pool_max"] == 2 and stats["pool_size"] <= 2
    assert stats.get("requests_queued", 0) > 0  # the pool was too small for the burst: callers waited
    with org.context():
        assert sorted(Event.objects.filter(session_id=session_id).values_list("seq", flat=True)) == list(range(1, clients + 1))
    connections.close_all()


def test_overload_outlasting_the_pool_wait_is_503_store_busy_and_writes_nothing(postgres_orgs, make_org, settings):
    org, session_id = _pooled_org(make_org, postgres_orgs, settings, max_size=1, timeout=0.2)
    holding, release = threading.Event(), threading.Event()

    def hold_the_only_connection() -> None:
        try:
            with org.context(), stores.org_atomic():
                Event.objects.count()
                holding.set()
                release.wait(60)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_the_only_connection)
    holder.start()
    assert holding.wait(30)
    try:
        busy = _append(org, session_id, "while busy")
    finally:
        connections.close_all()
        release.set()
        holder.join(30)
    assert busy.status_code == 503, busy.content
    assert busy["Retry-After"] == "2"
    assert busy.json() == {
        "status": 503,
        "code": "store_busy",
        "error": "the store is busy: no database connection came free in time; nothing was written, retry shortly",
    }
    with org.context():
        assert Event.objects.filter(session_id=session_id).count() == 0
    retried = _append(org, session_id, "after")
    assert retried.status_code == 201 and retried.json()["seq"] == 1
    connections.close_all()


def test_an_evicted_org_alias_closes_its_pool(postgres_orgs, make_org, settings):
    org, _ = _pooled_org(make_org, postgres_orgs, settings, max_size=2, timeout=10)
    pool = _pool_of(org)
    connections.close_all()
    settings.AGENTS_STORE_CACHE_SIZE = 8
    for i in range(12):  # more SQLite orgs than the cache holds: the PostgreSQL one is evicted
        settings.AGENTS_ORG_DATABASE = "sqlite"
        stores.open_store(f"pool-evict-{i}")
    settings.AGENTS_ORG_DATABASE = "postgres"
    assert pool.closed
    assert not any(alias.endswith(org.slug) for alias in connections.settings)
