"""Fixtures of the billing tests: a ledger the database itself refuses to read or write."""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager

import pytest
from django.db import connection

LEDGER_TABLES = ("billing_account", "billing_ledgerentry")


@contextmanager
def ledger_refused(actions=(sqlite3.SQLITE_READ,), times: int | None = None):
    """Make SQLite's authorizer deny `actions` on the ledger tables (`times` denials, or all).

    A real refusal by the database engine — the same failure a revoked grant or a dead ledger
    server gives the ORM (`DatabaseError`) — with nothing in the code under test replaced.
    """
    if connection.vendor != "sqlite":
        # The PostgreSQL + Redis pass (tests/conftest.py): the refusal is SQLite's authorizer
        # hook; the same DatabaseError from PostgreSQL is not injected here, so these few
        # fault-path tests run on SQLite only.
        pytest.skip("ledger refusal is injected through SQLite's authorizer (SQLite pass only)")
    connection.ensure_connection()
    raw = connection.connection
    left = [times]

    def authorizer(action, table, *_):
        if action in actions and table in LEDGER_TABLES and (left[0] is None or left[0] > 0):
            if left[0] is not None:
                left[0] -= 1
            return sqlite3.SQLITE_DENY
        return sqlite3.SQLITE_OK

    raw.set_authorizer(authorizer)
    try:
        yield
    finally:
        raw.set_authorizer(None)


@pytest.fixture
def refuse_ledger():
    """The `ledger_refused` context manager, for tests."""
    return ledger_refused


@pytest.fixture(autouse=True)
def cheap_password_hashing(settings):
    """Hash the fixtures' test passwords cheaply: PBKDF2 would dominate these tests' time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
