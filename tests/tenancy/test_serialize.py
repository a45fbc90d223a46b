"""`stores.org_atomic(serialize=...)`: transactions serialised on one org and key take turns."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connections

from tenancy import stores

pytestmark = pytest.mark.django_db(transaction=True)

SERVER = "postgres://postgres@127.0.0.1:5432/postgres"


def _advisory_waiters(dbname: str) -> int:
    with psycopg.connect(SERVER) as conn:
        query = (
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
            "WHERE l.locktype = 'advisory' AND NOT l.granted AND d.datname = %s"
        )
        return conn.execute(query, (dbname,)).fetchone()[0]


def _wait_for(predicate, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _serialised(org, key, entered: threading.Event, release: threading.Event | None, order: list[str], name: str) -> None:
    try:
        with org.context(), stores.org_atomic(serialize=key):
            order.append(name)
            entered.set()
            if release is not None:
                release.wait(30)
    finally:
        connections.close_all()


def test_a_second_serialised_transaction_of_the_org_waits_for_the_first_on_postgres(postgres_orgs, make_org):
    org = make_org("pgser")
    postgres_orgs.append(org.slug)
    first_in, second_in, release = threading.Event(), threading.Event(), threading.Event()
    order: list[str] = []
    first = threading.Thread(target=_serialised, args=(org, True, first_in, release, order, "first"))
    first.start()
    assert first_in.wait(30)
    second = threading.Thread(target=_serialised, args=(org, True, second_in, None, order, "second"))
    second.start()
    _wait_for(lambda: _advisory_waiters(stores.postgres_database_name(org.slug)) == 1, "the second to wait on the lock")
    assert not second_in.is_set()
    release.set()
    first.join(30)
    second.join(30)
    assert order == ["first", "second"]


def test_other_keys_and_unserialised_transactions_do_not_wait(postgres_orgs, make_org):
    org = make_org("pgser")
    postgres_orgs.append(org.slug)
    first_in, release = threading.Event(), threading.Event()
    order: list[str] = []
    first = threading.Thread(target=_serialised, args=(org, "balance", first_in, release, order, "first"))
    first.start()
    assert first_in.wait(30)
    try:
        for key in ("long-running-cap", False):
            entered = threading.Event()
            other = threading.Thread(target=_serialised, args=(org, key, entered, None, order, str(key)))
            other.start()
            other.join(30)
            assert entered.is_set()
    finally:
        release.set()
        first.join(30)
    assert order == ["first", "long-running-cap", "False"]


def test_serialize_on_sqlite_is_an_ordinary_immediate_transaction(org_a):
    with org_a.context() as alias, stores.org_atomic(serialize=True):
        assert connections[alias].in_atomic_block
