"""PostgreSQL mode: each org gets its own database on DATABASE_URL's server (127.0.0.1:5432)."""

import json
import uuid

import psycopg
import pytest
from django.db import connections
from psycopg import sql

from agents.models import Agent
from tenancy import stores

SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def postgres_mode(settings, monkeypatch):
    settings.AGENTS_ORG_DATABASE = "postgres"
    monkeypatch.setenv("DATABASE_URL", SERVER_URL)
    created: list[str] = []
    yield created
    for slug in created:
        for alias in list(connections):
            if alias.endswith(slug):
                connections[alias].close()
        with psycopg.connect(SERVER_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(stores.postgres_database_name(slug))))


def _pg_databases() -> set[str]:
    with psycopg.connect(SERVER_URL) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


def test_postgres_mode_round_trips_an_agent(postgres_mode, make_org):
    org = make_org("pg")
    postgres_mode.append(org.slug)
    assert stores.postgres_database_name(org.slug) in _pg_databases()
    assert not stores.store_path(org.slug).exists()
    created = org.client.post("/v1/agents", json.dumps({"name": "pg-agent", "instructions": "hi"}), content_type="application/json")
    assert created.status_code == 201
    fetched = org.client.get(f"/v1/agents/{created.json()['id']}")
    assert fetched.status_code == 200 and fetched.json()["instructions"] == "hi"
    with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname=stores.postgres_database_name(org.slug)) as conn:
        assert conn.execute("SELECT name FROM agents_agent").fetchall() == [("pg-agent",)]


def test_postgres_orgs_are_isolated(postgres_mode, make_org):
    a, b = make_org("pga"), make_org("pgb")
    postgres_mode.extend([a.slug, b.slug])
    a.client.post("/v1/agents", json.dumps({"name": "only-a"}), content_type="application/json")
    assert b.client.get("/v1/agents/only-a").status_code == 404
    with b.context():
        assert Agent.objects.count() == 0


def test_postgres_non_creating_resolver_never_creates(postgres_mode, db):
    slug = "pg-ghost-" + uuid.uuid4().hex[:6]
    with pytest.raises(stores.StoreMissing):
        stores.open_existing_store(slug)
    assert stores.postgres_database_name(slug) not in _pg_databases()
