"""A forked process never uses its parent's database connections (issue 51 item 1).

django-q2's cluster forks its workers (and re-forks one after each recycle or death) from a
process that has used the default database: it hands its connections back first
(`connections.close_all()`), but on PostgreSQL "back" is Django's pool (psycopg-pool), which
keeps them open — and a fork copies the pool. Each worker's first query (the minute tasks'
`existing_org_slugs`) then went down a server session the parent and its siblings were using
too: two processes interleaving one protocol stream answered "the last operation didn't
produce records" or "server closed the connection" now and then. These tests fork the way the
cluster does and release parent and child together at a barrier; the backend pid tells which
server session each side used, so the sharing shows on every run, not only when the streams
happen to collide.
"""

from __future__ import annotations

import multiprocessing

import pytest
from django.db import connection, connections

from tenancy import stores

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]

ROUNDS = 30


def _backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]


def _queries(barrier, out) -> None:
    """Run `existing_org_slugs` ROUNDS times after the barrier; put (backend pids, errors) on `out`."""
    pids, errors = set(), []
    barrier.wait(30)
    for _ in range(ROUNDS):
        try:
            stores.existing_org_slugs()
            pids.add(_backend_pid())
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            connections.close_all()  # back to the pool between tasks, as django-q2's worker does
    out.put((sorted(pids), errors))


def test_a_forked_worker_opens_its_own_postgresql_connections(store_kind, org_a):
    if store_kind != "postgres":
        pytest.skip("the PostgreSQL pool is what a fork copies (the SQLite engine empties its pool before a fork)")
    stores.existing_org_slugs()
    parent_pid = _backend_pid()
    connections.close_all()  # what django-q2 does before it forks: the connection goes back to the pool, open

    context = multiprocessing.get_context("fork")
    barrier, out = context.Barrier(2), context.Queue()
    child = context.Process(target=_queries, args=(barrier, out), daemon=True)
    child.start()
    try:
        barrier.wait(30)
        mine, errors = [], []
        for _ in range(ROUNDS):
            try:
                stores.existing_org_slugs()
                mine.append(_backend_pid())
            except Exception as exc:  # noqa: BLE001 - asserted below
                errors.append(f"{type(exc).__name__}: {exc}")
            finally:
                connections.close_all()
        child_pids, child_errors = out.get(timeout=30)  # a child whose stream was crossed may never answer
    finally:
        child.join(30)
        if child.is_alive():
            child.kill()
    assert (errors, child_errors) == ([], [])
    assert child.exitcode == 0
    assert parent_pid not in child_pids and not set(child_pids) & set(mine)  # never a session of the parent's
    assert stores.existing_org_slugs()  # the parent's own pool is intact
