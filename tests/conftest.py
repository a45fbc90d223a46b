"""Shared fixtures: orgs with their own store files and API keys, a loopback upstream.

Both stores (issue 17): `make test` runs the whole suite on SQLite, then a second pass over the
tests marked `both_stores` with `AGENTS_TEST_STORES=postgres` (tests/settings.py): the default
database and every org database on PostgreSQL, the channel layer, cache and task broker on
Redis. To make a test file join, add one line to it:

    pytestmark = pytest.mark.both_stores

(or decorate single tests). Such a test must hold on either store; `store_kind` tells it which
one it runs on, for the rare assertion that names the store itself (a file, a database). The
servers default to 127.0.0.1:5432 and :6379 (`AGENTS_TEST_POSTGRES_URL`, `AGENTS_TEST_REDIS_URL`);
helpers that read what the engine holds: tests/support/task_queue.py (the task queue, either broker),
tests/support/stored.py (a store's bytes or rows).

Left out of the PostgreSQL pass on purpose: tests that race several request threads inside the
test process itself (tests/chat/test_multitask.py) — on PostgreSQL every such thread holds a
pooled connection for its whole request, so they measure the test process's pool, not the
behaviour (the same races are held on SQLite, and over HTTP by the live tests). Kept in it: the
races of a count-then-insert rule under the org's gate lock (tests/runs/test_gate_race.py,
tests/coding/test_coding_api.py), six short requests each — only PostgreSQL's READ COMMITTED
shows the rule's fault, and six requests fit the pools.
"""

from __future__ import annotations

import functools

import uuid
from dataclasses import dataclass

import pytest
from django.test import Client

from tenancy import stores


def pytest_configure(config):
    """Let Django's TestCase guard admit org stores.

    Org stores are real files opened on demand (aliases registered at first use), isolated by a
    unique org per test rather than by a transaction. Django's TestCase blocks connections to
    aliases outside `databases`; this admits the org aliases and nothing else.
    """
    from django.db import connections
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.test import testcases

    case = testcases.SimpleTestCase
    original_patch = case.ensure_connection_patch_method.__func__
    original_add = case._add_databases_failures.__func__
    original_remove = case._remove_databases_failures.__func__

    def ensure_connection_patch_method(cls):
        guarded = original_patch(cls)
        real = BaseDatabaseWrapper.ensure_connection

        def patched(self, *args, **kwargs):
            if stores.is_org_alias(self.alias):
                return real(self, *args, **kwargs)
            return guarded(self, *args, **kwargs)

        return patched

    def without_org_aliases(method):
        @functools.wraps(method)
        def wrapper(cls):
            hidden = {a: connections.settings.pop(a) for a in list(connections.settings) if stores.is_org_alias(a)}
            try:
                return method(cls)
            finally:
                connections.settings.update(hidden)

        return classmethod(wrapper)

    ensure_connection_patch_method.__wrapped__ = original_patch  # Django's own, for tests/agents_site/test_django_private.py
    case.ensure_connection_patch_method = classmethod(ensure_connection_patch_method)
    case._add_databases_failures = without_org_aliases(original_add)
    case._remove_databases_failures = without_org_aliases(original_remove)


@pytest.fixture(scope="session")
def store_kind() -> str:
    """Return the store this pass runs on: `sqlite` (default) or `postgres` (PostgreSQL + Redis pass)."""
    from django.conf import settings

    return settings.TEST_STORES


@pytest.fixture(scope="session", autouse=True)
def _postgres_pass_cleanup():
    """In the PostgreSQL pass, drop this process's databases and Redis keys at the end, and
    at the start those a killed earlier run left (names `agt_{worker}_{pid}_…` of a dead pid)."""
    from django.conf import settings

    if settings.TEST_STORES != "postgres":
        yield
        return
    import os
    import re

    import psycopg
    import redis
    from django.db import connections
    from psycopg import sql

    def drop(conn, prefix: str) -> None:
        # Each DROP DATABASE waits for a checkpoint: one at a time, a pass's ~500 databases took
        # 13 min beside a CPU hog (0.8 a second). Drops waiting together share one checkpoint, so
        # the more wait at once the fewer checkpoints: 40 databases took 60-65 s dropped 8 at a
        # time and 1.6-1.8 s dropped 40 at a time (load 8-14, 2026-12-08). 30 at a time per
        # process keeps both xdist workers' cleanups and their pools under max_connections (100).
        from concurrent.futures import ThreadPoolExecutor

        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (prefix,))]
        lanes = 30

        def drop_some(batch: list[str]) -> None:
            with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as own:
                for name in batch:
                    own.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))

        with ThreadPoolExecutor(lanes) as pool:
            list(pool.map(drop_some, [names[i::lanes] for i in range(lanes) if names[i::lanes]]))

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        stale = {m.group(1) for (name,) in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'agt\\_%'")
                 if (m := re.match(r"^(agt_\w+?_(\d+)_)", name)) and not alive(int(m.group(2)))}
        for prefix in stale:
            drop(conn, prefix)
    yield
    connections.close_all()
    prefix = settings.AGENTS_ORG_DATABASE_PREFIX
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        drop(conn, prefix)
    client = redis.Redis.from_url(settings.REDIS_URL)
    for key in client.scan_iter(match=f"*{prefix.rstrip('_')}[:_]*", count=1000):
        client.delete(key)


@pytest.fixture(scope="session", autouse=True)
def _suite_end_credential_scan(_postgres_pass_cleanup, tmp_path_factory):
    """After the pass, scan every store it created for raw credentials; fail the pass on a finding (issue 49).

    Torn down before `_postgres_pass_cleanup` drops the PostgreSQL databases. The Litestream replicas the
    pass made are looked for under this process's pytest temporary root (where the tests' `AGENTS_BACKUP_URL`
    directories are) and the data directory. See tests/support/store_scan.py; `AGENTS_TEST_STORE_SCAN=0`
    skips it."""
    import os

    yield
    if os.environ.get("AGENTS_TEST_STORE_SCAN", "1") == "0":
        return
    from django.db import connections

    from tests.support.store_scan import report, scan_pass_stores

    connections.close_all()
    findings, figures = scan_pass_stores(replica_roots=[tmp_path_factory.getbasetemp()])
    print(f"\nsuite-end store scan: {figures['bytes']} bytes, {figures['seconds']} s (replicas: {figures['replicaBytes']} bytes, "
          f"{figures['replicaSeconds']} s), {len(findings)} finding(s)")
    if findings:
        pytest.fail(report(findings, figures), pytrace=False)


@dataclass
class OrgHandle:
    """A test org: its row, an admin user, an API key for that user, and a client using it."""

    org: object
    slug: str
    user: object
    key: str
    client: Client

    def context(self):
        """Act for this org (`with org.context(): …`)."""
        return stores.org_context(self.slug)


def _unique_slug(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_org(db):
    """Return a factory `make_org(prefix="t", admin=True, username=None) -> OrgHandle`."""
    from tenancy.services import api_key_create, membership_set, org_create

    def factory(prefix: str = "t", *, admin: bool = True, username: str | None = None) -> OrgHandle:
        slug = _unique_slug(prefix)
        org = org_create(slug=slug, name=slug)
        membership = membership_set(org=org, username=username or f"user-{slug}", password="pw", is_admin=admin)
        _, key = api_key_create(org=org, user=membership.user)
        return OrgHandle(org=org, slug=slug, user=membership.user, key=key, client=Client(HTTP_AUTHORIZATION=f"Bearer {key}"))

    return factory


@pytest.fixture
def org_a(make_org) -> OrgHandle:
    return make_org("a")


@pytest.fixture
def org_b(make_org) -> OrgHandle:
    return make_org("b")


@pytest.fixture(scope="session")
def upstream_server():
    """One loopback OpenAI-compatible server for the whole run (reset per test by `upstream`)."""
    from tests.support.upstream import Upstream

    server = Upstream().start()
    yield server
    server.stop()


@pytest.fixture
def upstream(upstream_server, settings):
    """The loopback upstream, wired as this test's inference gateway, with a clean script."""
    from agents import inference

    upstream_server.reset()
    upstream_server.models = ["test-model", "best"]
    settings.INFERENCE_BASE_URL = upstream_server.base_url
    settings.INFERENCE_API_KEY = "test-key"
    settings.AGENTS_DEFAULT_MODEL = "test-model"
    inference.reset_caches()
    yield upstream_server
    inference.reset_caches()


@pytest.fixture
def postgres_orgs(settings, monkeypatch):
    """Switch org stores to PostgreSQL (127.0.0.1:5432) for one test; drop the databases after.

    Yields a list: append each org slug created so its database is dropped at teardown.
    """
    import psycopg
    from django.db import connections
    from psycopg import sql

    from tenancy import stores

    server = "postgres://postgres@127.0.0.1:5432/postgres"
    settings.AGENTS_ORG_DATABASE = "postgres"
    monkeypatch.setenv("DATABASE_URL", server)
    created: list[str] = []
    yield created
    for slug in created:
        for alias in list(connections):
            if alias.endswith(slug):
                connections[alias].close()
        stores.close_store(slug)  # its pool too: no worker thread keeps reconnecting to a dropped database
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(stores.postgres_database_name(slug))))
