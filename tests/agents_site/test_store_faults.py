"""Text no store can hold is refused with 400; a store that cannot take writes answers 503.

NUL (U+0000) in any text field was a 500 in PostgreSQL mode (its text cannot hold it); both
stores now refuse it before anything is stored. A read-only or full org store answers 503
`store_unavailable` naming the condition, with nothing half-written.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
import subprocess

import psycopg
import pytest
from django.db import connections
from psycopg import sql

from agents.models import Agent
from tenancy import stores
from tenancy.backends.sqlite import SQLiteBackend

pytestmark = pytest.mark.django_db(transaction=True)

NUL = "a\u0000b"


@pytest.fixture(params=["sqlite", "postgres"])
def any_org(request, make_org):
    """An org on each kind of store (the PostgreSQL one on 127.0.0.1:5432)."""
    if request.param == "postgres":
        created = request.getfixturevalue("postgres_orgs")
        org = make_org("pgnul")
        created.append(org.slug)
        return org
    return make_org("nul")


def _row_counts(org) -> dict[str, int]:
    with org.context() as alias:
        connection = connections[alias]
        tables = [t for t in connection.introspection.table_names() if not t.startswith("django_")]
        with connection.cursor() as cursor:
            counts = {}
            for table in tables:
                cursor.execute(f'SELECT count(*) FROM "{table}"')
                counts[table] = cursor.fetchone()[0]
        return counts


def _post(org, path: str, body) -> object:
    return org.client.post(path, json.dumps(body), content_type="application/json")


def _setup(org) -> dict:
    agent = _post(org, "/v1/agents", {"name": "keeper"})
    assert agent.status_code == 201, agent.content
    session = _post(org, "/v1/agents/sessions", {"agent": "keeper", "title": "s"})
    assert session.status_code == 201, session.content
    return {"session": session.json()["id"]}


# (method, path template, body, the field the error names)
NUL_REQUESTS = [
    ("post", "/v1/agents", {"name": "n", "instructions": NUL}, "instructions"),
    ("post", "/v1/agents", {"name": NUL}, "name"),
    ("patch", "/v1/agents/keeper", {"description": NUL}, "description"),
    ("post", "/v1/agents/sessions", {"agent": "keeper", "title": NUL}, "title"),
    ("post", "/v1/agents/sessions/{session}/events", {"kind": "message", "actor": NUL}, "actor"),
    ("post", "/v1/agents/sessions/{session}/events", {"kind": "message", "payload": {"text": NUL}}, "payload.text"),
    ("post", "/v1/agents/sessions/{session}/message", {"message": NUL}, "message"),
    ("patch", "/v1/agents/sessions/{session}", {"title": NUL}, "title"),
    ("post", "/v1/agents/targets", {"label": NUL, "kind": "local"}, "label"),
    ("post", "/v1/agents/keeper/run", {"input": NUL}, "input"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), NUL_REQUESTS, ids=[f"{r[0]} {r[1]} {r[3]}" for r in NUL_REQUESTS])
def test_a_nul_in_any_text_field_is_400_and_nothing_is_stored(any_org, method, path, body, field):
    ids = _setup(any_org)
    before = _row_counts(any_org)
    response = getattr(any_org.client, method)(path.format(**ids), json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json() == {
        "status": 400,
        "code": "invalid_request",
        "error": f"invalid request: {field}: must not contain a NUL character (U+0000)",
        "fields": [{"field": field, "message": "must not contain a NUL character (U+0000)"}],
    }
    assert _row_counts(any_org) == before


@pytest.mark.parametrize("path", ["/v1/agents/a%00b", "/v1/agents/sessions/sess%00x", "/v1/agents/runs?agent=a%00b"])
def test_a_nul_in_a_path_or_query_is_400(any_org, path):
    response = any_org.client.get(path)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"
    assert "NUL character" in response.json()["error"]


def test_an_escaped_backslash_u0000_is_ordinary_text(any_org):
    response = _post(any_org, "/v1/agents", {"name": "literal", "description": "\\u0000"})
    assert response.status_code == 201, response.content
    assert response.json()["description"] == "\\u0000"


# --- a store that cannot take writes ---------------------------------------------------------


def _immutable(path) -> None:
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
        pytest.skip("needs chattr +i (root on a filesystem with immutable files) to make a file read-only for root")


def test_a_read_only_sqlite_org_file_answers_503_store_unavailable_and_keeps_serving_reads(make_org):
    org = make_org("ro")
    assert _post(org, "/v1/agents", {"name": "kept"}).status_code == 201
    path = stores.store_path(org.slug)
    with contextlib.closing(sqlite3.connect(path)) as conn:  # fold the WAL in: the file is the whole store
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connections.close_all()
    assert stores.close_store(org.slug)
    _immutable(path)
    try:
        refused = _post(org, "/v1/agents", {"name": "refused"})
        listed = org.client.get("/v1/agents")
    finally:
        connections.close_all()
        subprocess.run(["chattr", "-i", str(path)], check=True)
    assert refused.status_code == 503, refused.content
    assert refused.json() == {
        "status": 503,
        "code": "store_unavailable",
        "error": "the org's store is read-only; nothing was written",
        "condition": "read_only",
    }
    assert listed.status_code == 200 and [a["name"] for a in listed.json()["agents"]] == ["kept"]
    with org.context():
        assert list(Agent.objects.values_list("name", flat=True)) == ["kept"]


def test_a_read_only_postgres_org_database_answers_503_store_unavailable(postgres_orgs, make_org):
    org = make_org("pgro")
    postgres_orgs.append(org.slug)
    assert _post(org, "/v1/agents", {"name": "kept"}).status_code == 201
    dbname = stores.postgres_database_name(org.slug)
    server = "postgres://postgres@127.0.0.1:5432/postgres"
    stores.close_store(org.slug)  # its pooled connections end; new ones start read-only
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(sql.Identifier(dbname)))
    try:
        refused = _post(org, "/v1/agents", {"name": "refused"})
        listed = org.client.get("/v1/agents")
    finally:
        connections.close_all()
        stores.close_store(org.slug)
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only").format(sql.Identifier(dbname)))
    assert refused.status_code == 503, refused.content
    assert refused.json()["code"] == "store_unavailable" and refused.json()["condition"] == "read_only"
    assert listed.status_code == 200 and [a["name"] for a in listed.json()["agents"]] == ["kept"]
    with org.context():
        assert list(Agent.objects.values_list("name", flat=True)) == ["kept"]


def test_a_full_sqlite_org_store_answers_503_store_unavailable_and_writes_nothing(make_org, monkeypatch):
    org = make_org("full")
    assert _post(org, "/v1/agents", {"name": "kept"}).status_code == 201
    original = SQLiteBackend.settings_for

    def capped(self, slug):
        entry = original(self, slug)
        if slug == org.slug:  # the file may not grow by a single page: SQLITE_FULL on any growth
            entry["OPTIONS"]["init_command"] += " PRAGMA max_page_count=1;"
        return entry

    monkeypatch.setattr(SQLiteBackend, "settings_for", capped)
    connections.close_all()
    assert stores.close_store(org.slug)
    try:
        refused = _post(org, "/v1/agents", {"name": "big", "instructions": "x" * 30_000})
        listed = org.client.get("/v1/agents")
    finally:
        connections.close_all()
        monkeypatch.undo()
        stores.close_store(org.slug)
    assert refused.status_code == 503, refused.content
    assert refused.json() == {
        "status": 503,
        "code": "store_unavailable",
        "error": "the org's store is full; nothing was written",
        "condition": "full",
    }
    assert listed.status_code == 200
    with org.context():
        assert list(Agent.objects.values_list("name", flat=True)) == ["kept"]


def test_a_busy_pool_met_before_the_api_answers_503_store_busy_in_the_error_shape(org_a, monkeypatch):
    # The principal is looked up by a middleware, outside the API's own error handler.
    from django.db import OperationalError
    from django.test import Client
    from psycopg_pool import PoolTimeout

    import tenancy.middleware

    def busy(request):
        try:
            raise PoolTimeout("couldn't get a connection after 10.00 sec")
        except PoolTimeout as exc:
            raise OperationalError(str(exc)) from exc

    monkeypatch.setattr(tenancy.middleware, "resolve_principal", busy)
    response = Client(HTTP_AUTHORIZATION=f"Bearer {org_a.key}", raise_request_exception=False).get("/v1/agents")
    assert response.status_code == 503
    assert response["Retry-After"] == "2"
    assert response.json()["code"] == "store_busy"
