"""PostgreSQL mode: each org gets its own database on DATABASE_URL's server (127.0.0.1:5432)."""

import json
import uuid

import psycopg
import pytest
from django.db import connections

from agents.models import Agent
from tenancy import stores

SERVER_URL = "postgres://postgres@127.0.0.1:5432/postgres"


def _pg_databases() -> set[str]:
    with psycopg.connect(SERVER_URL) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


def test_postgres_orgs_round_trips_an_agent(postgres_orgs, make_org):
    org = make_org("pg")
    postgres_orgs.append(org.slug)
    assert stores.postgres_database_name(org.slug) in _pg_databases()
    assert not stores.store_path(org.slug).exists()
    created = org.client.post("/v1/agents", json.dumps({"name": "pg-agent", "instructions": "hi"}), content_type="application/json")
    assert created.status_code == 201
    fetched = org.client.get(f"/v1/agents/{created.json()['id']}")
    assert fetched.status_code == 200 and fetched.json()["instructions"] == "hi"
    with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname=stores.postgres_database_name(org.slug)) as conn:
        assert conn.execute("SELECT name FROM agents_agent").fetchall() == [("pg-agent",)]


def test_postgres_orgs_are_isolated(postgres_orgs, make_org):
    a, b = make_org("pga"), make_org("pgb")
    postgres_orgs.extend([a.slug, b.slug])
    a.client.post("/v1/agents", json.dumps({"name": "only-a"}), content_type="application/json")
    assert b.client.get("/v1/agents/only-a").status_code == 404
    with b.context():
        assert Agent.objects.count() == 0


def test_postgres_non_creating_resolver_never_creates(postgres_orgs, db):
    slug = "pg-ghost-" + uuid.uuid4().hex[:6]
    with pytest.raises(stores.StoreMissing):
        stores.open_existing_store(slug)
    assert stores.postgres_database_name(slug) not in _pg_databases()


@pytest.mark.parametrize(
    "body",
    [
        {"name": "nul", "instructions": "a\u0000b"},
        {"name": "nul", "tools": ["a\u0000b"]},
        {"name": "long-model", "model": "m" * 300},
        {"name": "long-cron", "executionMode": "long-running", "schedule": ",".join(["1"] * 120) + " * * * *"},
    ],
)
def test_postgres_orgs_refuses_text_its_columns_cannot_hold_with_400(postgres_orgs, make_org, body):
    # Each of these was a 500 from PostgreSQL (NUL in text, value wider than its column).
    org = make_org("pgt")
    postgres_orgs.append(org.slug)
    response = org.client.post("/v1/agents", json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request"
    with org.context():
        assert Agent.objects.count() == 0


def test_postgres_existing_org_slugs_lists_orgs_with_a_database(postgres_orgs, make_org):
    from tenancy.models import Org

    org = make_org("pgl")
    postgres_orgs.append(org.slug)
    Org.objects.create(slug="pg-row-only-" + uuid.uuid4().hex[:6])
    slugs = stores.existing_org_slugs()
    assert org.slug in slugs and not any(s.startswith("pg-row-only-") for s in slugs)


def test_an_org_being_provisioned_elsewhere_does_not_stall_other_orgs(postgres_orgs, transactional_db, make_org):
    # transactional_db: the provisioning thread records the placement in the default database,
    # which a test transaction held open by this thread would block.
    # Provisioning used to run under the process-wide store lock: while another process held
    # org X's advisory lock (creating and migrating it), every org query here waited too.
    import hashlib
    import threading

    ready = make_org("pgr")
    postgres_orgs.append(ready.slug)
    slow = "pg-slow-" + uuid.uuid4().hex[:6]
    postgres_orgs.append(slow)
    dbname = stores.postgres_database_name(slow)
    key = int.from_bytes(hashlib.sha256(dbname.encode()).digest()[:8], "big", signed=True)
    done: list[object] = []
    with psycopg.connect(SERVER_URL, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
        provisioning = threading.Thread(target=lambda: done.append(stores.open_store(slow)))
        provisioning.start()
        other = threading.Thread(target=lambda: done.append(_count_agents(ready)))
        other.start()
        other.join(timeout=15)
        finished_while_locked = list(done)
        holder.execute("SELECT pg_advisory_unlock(%s)", (key,))
    provisioning.join(timeout=60)
    other.join(timeout=60)
    assert finished_while_locked == [0]
    assert stores.postgres_database_name(slow) in _pg_databases()


def _count_agents(org) -> int:
    try:
        with org.context():
            return Agent.objects.count()
    finally:
        connections.close_all()


def test_long_slugs_never_share_a_truncated_database_name(settings):
    # PostgreSQL cuts identifiers at 63 bytes: two 63-character slugs with one start would
    # both have been `agents_org_` + the same 52 characters, one database for two orgs.
    settings.AGENTS_ORG_DATABASE_PREFIX = "agents_org_"
    first, second = "a" * 62 + "1", "a" * 62 + "2"
    names = {stores.postgres_database_name(first), stores.postgres_database_name(second)}
    assert len(names) == 2 and all(len(n.encode()) <= 63 for n in names)
    assert stores.postgres_database_name("short") == "agents_org_short"


def test_a_new_org_database_is_copied_from_the_migrated_template(postgres_orgs, make_org):
    from tenancy.backends.postgres import template_name

    org = make_org("pgtpl")
    postgres_orgs.append(org.slug)
    assert template_name() in _pg_databases()
    with psycopg.connect(host="127.0.0.1", port=5432, user="postgres", dbname=stores.postgres_database_name(org.slug)) as conn:
        applied = {r[0] for r in conn.execute("SELECT app FROM django_migrations")}
    assert {"agents", "agent_sessions", "targets"} <= applied
    created = org.client.post("/v1/agents", json.dumps({"name": "from-template"}), content_type="application/json")
    assert created.status_code == 201, created.content
