"""Orgs over several PostgreSQL servers (issue 17 item 5): placed by a stable rule, recorded, never moved.

The second server is a real PostgreSQL: initdb'd from Debian's binaries into a temporary
directory (as the `postgres` user: initdb refuses root), started on a free port for this
module, stopped and removed after.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest
from django.core.management import call_command
from django.db import connections
from psycopg import sql

from tenancy import registry, stores
from tenancy.backends import postgres as pg_backend
from tenancy.models import OrgPlacement
from tests.support.live import free_port

MAIN = "postgres://postgres@127.0.0.1:5432/postgres"
PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _as_postgres(*args: str) -> subprocess.CompletedProcess:
    command = list(args) if os.geteuid() != 0 else ["runuser", "-u", "postgres", "--", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def second_server():
    """A second PostgreSQL server on a free port; yields its URL."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip(f"no PostgreSQL binaries in {PG_BIN} to start a second server")
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.skip("no postgres user to run initdb as (it refuses root)")
    data = Path(tempfile.mkdtemp(prefix="agents-pg2-"))
    shutil.chown(data, "postgres", "postgres")
    port = free_port()
    _as_postgres(str(PG_BIN / "initdb"), "-D", str(data / "db"), "-A", "trust", "-U", "postgres", "--no-sync")
    _as_postgres(
        str(PG_BIN / "pg_ctl"), "-D", str(data / "db"), "-l", str(data / "log"), "-w", "-t", "60",
        "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=40", "start",
    )
    try:
        yield f"postgres://postgres@127.0.0.1:{port}/postgres"
    finally:
        _as_postgres(str(PG_BIN / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def two_servers(postgres_orgs, second_server, settings):
    """PostgreSQL org mode over the main server and the second; yields (slugs to drop, urls)."""
    settings.AGENTS_ORG_DATABASE_SERVERS = [MAIN, second_server]
    created: list[str] = []
    yield created, (MAIN, second_server)
    for slug in created:
        stores.close_store(slug)
        for url in (MAIN, second_server):
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(stores.postgres_database_name(slug))))
    with psycopg.connect(second_server, autocommit=True) as conn:  # the second server's template, built by these tests
        for (name,) in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'agents_org_template_%'").fetchall():
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _databases(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute("SELECT datname FROM pg_database")}


def _key(url: str) -> str:
    return pg_backend.server_key(pg_backend._parse(url, "test"))


def _orgs_until_both_servers_hold_one(make_org, created, urls):
    """Make orgs until each server holds at least one (rendezvous spreads them; a few suffice)."""
    orgs = []
    for _ in range(40):
        org = make_org("sh")
        created.append(org.slug)
        orgs.append(org)
        if {_key(u) for u in urls} <= set(OrgPlacement.objects.values_list("server", flat=True)):
            return orgs
    raise AssertionError("40 orgs all landed on one server")


def test_new_orgs_are_placed_by_the_stable_rule_recorded_and_served_from_their_server(two_servers, make_org):
    created, urls = two_servers
    orgs = _orgs_until_both_servers_hold_one(make_org, created, urls)
    keys = sorted(_key(u) for u in urls)
    by_key = {_key(u): u for u in urls}
    for org in orgs:
        placement = OrgPlacement.objects.get(slug=org.slug)
        assert placement.server == pg_backend.rendezvous(org.slug, keys) == pg_backend.rendezvous(org.slug, keys[::-1])
        assert placement.database == stores.postgres_database_name(org.slug)
        other = next(u for k, u in by_key.items() if k != placement.server)
        assert placement.database in _databases(by_key[placement.server])
        assert placement.database not in _databases(other)
    # The API works for an org on either server and writes to that server's database.
    for org in orgs[-2:]:
        created_agent = org.client.post("/v1/agents", json.dumps({"name": "sharded"}), content_type="application/json")
        assert created_agent.status_code == 201, created_agent.content
        url = by_key[OrgPlacement.objects.get(slug=org.slug).server].rsplit("/", 1)[0]
        with psycopg.connect(f"{url}/{stores.postgres_database_name(org.slug)}") as conn:
            assert conn.execute("SELECT name FROM agents_agent").fetchall() == [("sharded",)]
    assert {o.slug for o in orgs} <= set(stores.existing_org_slugs())  # one query per server


def test_a_placed_org_never_moves_when_the_server_list_changes(two_servers, make_org, settings):
    created, (main, second) = two_servers
    org = make_org("mv")
    created.append(org.slug)
    placed = OrgPlacement.objects.get(slug=org.slug).server
    kept = main if _key(main) == placed else second
    other = second if kept == main else main
    # Reordered list, or a third server added: the org stays where it was recorded.
    settings.AGENTS_ORG_DATABASE_SERVERS = [other, kept, "postgres://postgres@127.0.0.1:1/postgres"]
    stores.close_store(org.slug)
    assert org.client.get("/v1/agents").status_code == 200
    assert OrgPlacement.objects.get(slug=org.slug).server == placed
    # Its server gone from the list: a loud error, and no new database made anywhere else.
    settings.AGENTS_ORG_DATABASE_SERVERS = [other]
    stores.close_store(org.slug)
    with pytest.raises(pg_backend.ServerMissing, match=placed):
        stores.open_store(org.slug)
    assert stores.postgres_database_name(org.slug) not in _databases(other)
    assert OrgPlacement.objects.get(slug=org.slug).server == placed


def test_migrate_orgs_walks_every_server(two_servers, make_org, transactional_db):
    created, urls = two_servers
    orgs = _orgs_until_both_servers_hold_one(make_org, created, urls)
    # An org database on each server left behind by older code: its tables missing.
    by_key = {_key(u): u for u in urls}
    stale = {}
    for key, url in by_key.items():
        org = next(o for o in orgs if OrgPlacement.objects.get(slug=o.slug).server == key)
        stores.close_store(org.slug)
        name = stores.postgres_database_name(org.slug)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        stale[org.slug] = url
        stores._provisioned.discard(registry.ALIAS_PREFIX + org.slug)  # as a freshly deployed process
    out = io.StringIO()
    call_command("migrate_orgs", stdout=out)
    assert "template ready on 2 place(s)" in out.getvalue()
    for slug, url in stale.items():
        with psycopg.connect(f"{url.rsplit('/', 1)[0]}/{stores.postgres_database_name(slug)}") as conn:
            assert conn.execute("SELECT count(*) FROM agents_agent").fetchone() == (0,)
    for url in urls:
        assert pg_backend.template_name() in _databases(url)
    connections.close_all()
