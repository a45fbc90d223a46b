"""PostgreSQL org stores: the database `agents_org_{slug}` per org on `DATABASE_URL`'s server.

Each org database is reached through a bounded per-process connection pool (Django's native
pool, psycopg-pool): at most `AGENTS_ORG_DB_POOL_MAX_SIZE` connections, none kept once idle for
`ORG_POOL_MAX_IDLE_SECONDS`, a caller waiting at most `AGENTS_DB_POOL_TIMEOUT_SECONDS` for one
(then `psycopg_pool.PoolTimeout`, answered 503 `store_busy`). The pool is closed when the org's
alias is evicted from the store cache. Creation and migration of a new org's database are
serialised across processes by a session advisory lock on the server's maintenance database.
"""

from __future__ import annotations

import hashlib
import os

from django.conf import settings
from django.db import connections

from tenancy import registry
from tenancy.backends.base import OrgStoreBackend, default_settings_copy, migrate

#: Seconds an idle pooled connection to an org database is kept (psycopg-pool's `max_idle`).
ORG_POOL_MAX_IDLE_SECONDS = 60.0


def advisory_key(*parts: str) -> int:
    """Return a signed 64-bit advisory lock key for `parts` (stable across processes)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def database_name(slug: str) -> str:
    """Return the PostgreSQL database name of (validated) org `slug`: `agents_org_{slug}`."""
    return "agents_org_" + slug


def org_pool_options() -> dict:
    """Return the psycopg-pool options of one org database's pool (sizes from settings)."""
    max_size = max(1, int(getattr(settings, "AGENTS_ORG_DB_POOL_MAX_SIZE", 4)))
    return {
        "min_size": 0,
        "max_size": max_size,
        "max_idle": ORG_POOL_MAX_IDLE_SECONDS,
        "num_workers": 1,  # background threads per pool (psycopg-pool's default is 3); one per cached org
        "timeout": float(getattr(settings, "AGENTS_DB_POOL_TIMEOUT_SECONDS", 10.0)),
    }


def server_settings() -> dict:
    """Return `DATABASE_URL` parsed as Django settings; raise `RuntimeError` unless PostgreSQL."""
    import dj_database_url

    url = os.environ.get("DATABASE_URL", "")
    if not url:
        raise RuntimeError("AGENTS_ORG_DATABASE=postgres needs DATABASE_URL")
    parsed = dj_database_url.parse(url, conn_max_age=0)
    if "postgresql" not in parsed["ENGINE"]:
        raise RuntimeError("AGENTS_ORG_DATABASE=postgres needs a postgres:// DATABASE_URL")
    return parsed


def server_connection():
    """Open an autocommit psycopg connection to DATABASE_URL's database (for CREATE DATABASE)."""
    import psycopg

    server = server_settings()
    keys = {"host": "HOST", "port": "PORT", "user": "USER", "password": "PASSWORD"}
    conninfo = {k: server.get(v) for k, v in keys.items() if server.get(v)}
    return psycopg.connect(dbname=server.get("NAME") or "postgres", autocommit=True, **conninfo)


class PostgresBackend(OrgStoreBackend):
    """One PostgreSQL database per org, pooled per process, migrated on first use."""

    kind = "postgres"

    def settings_for(self, slug: str) -> dict:
        """Return the `DATABASES` entry of org `slug`'s database, with its pool options."""
        base = default_settings_copy()
        server = server_settings()
        base.update({k: server[k] for k in ("ENGINE", "USER", "PASSWORD", "HOST", "PORT")})
        options = {k: v for k, v in server.get("OPTIONS", {}).items() if k != "pool"}
        options["pool"] = org_pool_options()
        base.update(
            {
                "NAME": database_name(slug),
                "OPTIONS": options,
                "CONN_MAX_AGE": 0,
                "CONN_HEALTH_CHECKS": False,
                "ATOMIC_REQUESTS": False,
                "TEST": {"NAME": database_name(slug)},
            }
        )
        return base

    def provision(self, slug: str, alias: str) -> None:
        """Create `agents_org_{slug}` if missing and migrate it, under a cross-process lock."""
        from django.db.migrations.executor import MigrationExecutor
        from psycopg import sql

        dbname = database_name(slug)
        registry.register(alias, self.settings_for(slug))
        with server_connection() as conn:
            lock_key = advisory_key(dbname)
            conn.execute("SELECT pg_advisory_lock(%s)", (lock_key,))
            try:
                exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
                if not exists:
                    conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
                executor = MigrationExecutor(connections[alias])
                targets = executor.loader.graph.leaf_nodes()
                if executor.migration_plan(targets):
                    migrate(alias)
                connections[alias].close()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key,))

    def exists(self, slug: str) -> bool:
        """Return True when `agents_org_{slug}` exists on the server."""
        with server_connection() as conn:
            return bool(conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database_name(slug),)).fetchone())

    def existing(self, slugs: list[str]) -> list[str]:
        """Return those of `slugs` with a database: one query for all, not one connection each."""
        with server_connection() as conn:
            names = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        return [slug for slug in slugs if database_name(slug) in names]

    def serialize(self, alias: str, key: str) -> None:
        """Take a transaction-level advisory lock on (`alias`'s database, `key`); wait for it.

        Released by the commit or rollback of the transaction it was taken in, so two
        transactions serialised on one key run one after the other even under READ COMMITTED.
        """
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [advisory_key("org-serialize", alias, key)])
