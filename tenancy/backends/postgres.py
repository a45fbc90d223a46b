"""PostgreSQL org stores: the database `agents_org_{slug}` per org on `DATABASE_URL`'s server,
or, with `AGENTS_ORG_DATABASE_SERVERS`, on one of several servers: placed by a rendezvous hash of
the slug when first created, the placement recorded in the default database
(`tenancy.OrgPlacement`) and never moved by the code (`ServerMissing` if its server leaves the list).

The name's prefix is `AGENTS_ORG_DATABASE_PREFIX` (default `agents_org_`, so several deployments
or test runs can share a server); a name longer than PostgreSQL's 63 bytes ends in a hash rather
than being truncated by the server onto another org's. A new org's database is a copy (`CREATE
DATABASE … TEMPLATE`) of a template database migrated once per code version on the server
(`{prefix}template_{version}`: underscores, which no slug holds), so creating one costs a copy,
not a migration (the SQLite backend's template file, in PostgreSQL).

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
import threading

from django.conf import settings
from django.db import connections

from tenancy import registry
from tenancy.backends.base import OrgStoreBackend, default_settings_copy, migrate, migrate_if_behind
from tenancy.backends.sqlite import code_version
from tenancy.models import OrgPlacement

#: Seconds an idle pooled connection to an org database is kept (psycopg-pool's `max_idle`).
ORG_POOL_MAX_IDLE_SECONDS = 60.0


def advisory_key(*parts: str) -> int:
    """Return a signed 64-bit advisory lock key for `parts` (stable across processes)."""
    digest = hashlib.sha256("\x1f".join(parts).encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


#: PostgreSQL's longest identifier (bytes); longer names are silently truncated by the server.
MAX_NAME_BYTES = 63


def database_prefix() -> str:
    """Return `AGENTS_ORG_DATABASE_PREFIX` (default `agents_org_`), the start of every org database name."""
    return getattr(settings, "AGENTS_ORG_DATABASE_PREFIX", "agents_org_") or "agents_org_"


def database_name(slug: str) -> str:
    """Return the PostgreSQL database name of (validated) org `slug`: `{prefix}{slug}`.

    A name over 63 bytes keeps its first part and ends in 12 hex of the slug's SHA-256, so two
    long slugs never meet on one truncated name (PostgreSQL would cut both to the same 63 bytes).
    """
    name = database_prefix() + slug
    if len(name) <= MAX_NAME_BYTES:
        return name
    digest = hashlib.sha256(slug.encode()).hexdigest()[:12]
    return name[: MAX_NAME_BYTES - 13] + "-" + digest


def template_name() -> str:
    """Return the name of this code version's template database: `{prefix}template_{version}`."""
    return (database_prefix() + "template_" + code_version())[:MAX_NAME_BYTES]


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


def _parse(url: str, what: str) -> dict:
    import dj_database_url

    parsed = dj_database_url.parse(url, conn_max_age=0)
    if "postgresql" not in parsed["ENGINE"]:
        raise RuntimeError(f"AGENTS_ORG_DATABASE=postgres needs postgres:// URLs in {what}")
    return parsed


def server_settings() -> dict:
    """Return `DATABASE_URL` parsed as Django settings; raise `RuntimeError` unless PostgreSQL."""
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        raise RuntimeError("AGENTS_ORG_DATABASE=postgres needs DATABASE_URL")
    return _parse(url, "DATABASE_URL")


def server_key(server: dict) -> str:
    """Return a server's identity as recorded in placements: `host:port` (credentials may change)."""
    return f"{server.get('HOST') or '127.0.0.1'}:{server.get('PORT') or 5432}"


def servers() -> dict[str, dict]:
    """Return the org database servers by key: `AGENTS_ORG_DATABASE_SERVERS`, else DATABASE_URL's server."""
    urls = list(getattr(settings, "AGENTS_ORG_DATABASE_SERVERS", None) or [])
    parsed = [_parse(url, "AGENTS_ORG_DATABASE_SERVERS") for url in urls] or [server_settings()]
    return {server_key(p): p for p in parsed}


def rendezvous(slug: str, keys: list[str]) -> str:
    """Return the server key a new org `slug` goes to: the highest SHA-256 of (key, slug).

    Stable (the same slug and servers always give the same answer, in any order) and, when a
    server is added, only about 1/N of new slugs change their answer; placed orgs never move
    at all (their placement is recorded).
    """
    return max(keys, key=lambda k: hashlib.sha256(f"{k}\x1f{slug}".encode()).digest())


def server_connection(server: dict | None = None):
    """Open an autocommit psycopg connection to `server` (default: DATABASE_URL's), for CREATE DATABASE."""
    import psycopg

    server = server or server_settings()
    keys = {"host": "HOST", "port": "PORT", "user": "USER", "password": "PASSWORD"}
    conninfo = {k: server.get(v) for k, v in keys.items() if server.get(v)}
    return psycopg.connect(dbname=server.get("NAME") or "postgres", autocommit=True, **conninfo)


class ServerMissing(RuntimeError):
    """An org's database is recorded on a server that `AGENTS_ORG_DATABASE_SERVERS` no longer lists."""


# slug → server key, as recorded (placements never change, so a process may keep them).
_placements: dict[str, str] = {}


def _recorded(slug: str) -> str | None:
    key = _placements.get(slug)
    if key is None:
        key = OrgPlacement.objects.using("default").filter(slug=slug).values_list("server", flat=True).first()
        if key is not None:
            _placements[slug] = key
    return key


def _legacy_key() -> str:
    """The key of DATABASE_URL's server: where every org database lived before shards."""
    return server_key(server_settings())


def _server_of(key: str, slug: str, known: dict[str, dict]) -> dict:
    if key not in known:
        raise ServerMissing(
            f"org {slug!r} has its database on {key}, which AGENTS_ORG_DATABASE_SERVERS does not list "
            "(an org never moves silently: list the server again, or move the database and its placement by hand)"
        )
    return known[key]


def _place(slug: str, known: dict[str, dict]) -> str:
    """Return org `slug`'s server key, recording a new placement if it has none (caller holds no lock)."""
    from django.db import IntegrityError, transaction


    key = _recorded(slug)
    if key is not None:
        return key
    legacy = _legacy_key()
    if _database_exists(known.get(legacy) or server_settings(), database_name(slug)):
        key = legacy  # made before placements were recorded: it stays there (ServerMissing if unlisted)
    else:
        key = rendezvous(slug, sorted(known))
    try:
        with transaction.atomic(using="default"):
            OrgPlacement.objects.using("default").create(slug=slug, server=key, database=database_name(slug))
    except IntegrityError:  # another process placed it first: theirs is the placement
        key = OrgPlacement.objects.using("default").get(slug=slug).server
    _placements[slug] = key
    return key


def _database_exists(server: dict, name: str) -> bool:
    with server_connection(server) as conn:
        return bool(conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone())


def _migrate_if_behind(alias: str) -> None:
    """Apply pending migrations to `alias` (an existing org database), if any; close its connection."""
    migrate_if_behind(alias)
    connections[alias].close()


class PostgresBackend(OrgStoreBackend):
    """One PostgreSQL database per org, pooled per process, migrated on first use."""

    kind = "postgres"

    def server_for(self, slug: str, *, place: bool = False) -> dict:
        """Return the settings of the server holding org `slug`'s database.

        Without `AGENTS_ORG_DATABASE_SERVERS`: DATABASE_URL's server, nothing recorded (one
        server, as before shards). With it: the recorded placement; with none yet, DATABASE_URL's
        server if the org's database is already there (made before the setting), else the
        `rendezvous` choice — recorded when `place` (provisioning). Raises `ServerMissing` when
        the recorded server is no longer configured.
        """
        if not getattr(settings, "AGENTS_ORG_DATABASE_SERVERS", None):
            return server_settings()
        known = servers()
        if place:
            key = _place(slug, known)
        else:
            key = _recorded(slug) or rendezvous(slug, sorted(known))
        return _server_of(key, slug, known)

    @staticmethod
    def _server_part(server: dict) -> dict:
        return {k: server[k] for k in ("ENGINE", "USER", "PASSWORD", "HOST", "PORT")}

    def settings_for(self, slug: str) -> dict:
        """Return the `DATABASES` entry of org `slug`'s database (on its server), with its pool options."""
        base = default_settings_copy()
        server = self.server_for(slug)
        base.update(self._server_part(server))
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
        """Place org `slug` on a server (recorded once), create its database there if missing (a
        copy of the template) or migrate it; under a cross-process lock on that server."""
        from psycopg import sql

        dbname = database_name(slug)
        server = self.server_for(slug, place=True)
        registry.register(alias, self.settings_for(slug))
        with server_connection(server) as conn:
            lock_key = advisory_key(dbname)
            conn.execute("SELECT pg_advisory_lock(%s)", (lock_key,))
            try:
                exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
                if not exists:
                    template = self._ensure_template(conn, server)
                    conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(dbname), sql.Identifier(template)))
                else:
                    _migrate_if_behind(alias)  # made by older code: bring it to this code's migrations
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key,))

    def ensure_templates(self) -> list[str]:
        """Build this code version's template on every configured server (deploy time); return their keys."""
        done = []
        for key, server in servers().items():
            with server_connection(server) as conn:
                self._ensure_template(conn, server)
            done.append(key)
        return done

    def _ensure_template(self, conn, server: dict) -> str:
        """Return this code version's template database on `conn`'s server, building it once.

        Built under its own advisory lock, migrated at a private name then renamed, and left
        with no connection (CREATE DATABASE … TEMPLATE refuses a template someone is connected to).
        """
        from psycopg import sql

        name = template_name()
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            return name
        lock_key = advisory_key(name)
        conn.execute("SELECT pg_advisory_lock(%s)", (lock_key,))
        try:
            if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                return name
            building = name[: MAX_NAME_BYTES - 9] + "_building"
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(building)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(building)))
            alias = f"{registry.TEMPLATE_PREFIX}pg_{os.getpid()}_{threading.get_ident()}"
            unpooled = default_settings_copy()
            unpooled.update(self._server_part(server))
            unpooled.update({"NAME": building, "OPTIONS": {}, "CONN_MAX_AGE": 0, "CONN_HEALTH_CHECKS": False,
                             "ATOMIC_REQUESTS": False, "TEST": {"NAME": building}})
            registry.register(alias, unpooled)
            try:
                migrate(alias)
            finally:
                registry.unregister(alias)
            conn.execute(sql.SQL("ALTER DATABASE {} RENAME TO {}").format(sql.Identifier(building), sql.Identifier(name)))
            return name
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key,))

    def exists(self, slug: str) -> bool:
        """Return True when org `slug`'s database exists on its server (never places or creates)."""
        return _database_exists(self.server_for(slug), database_name(slug))

    def existing(self, slugs: list[str]) -> list[str]:
        """Return those of `slugs` with a database: one query per server, not one connection per org."""
        if not getattr(settings, "AGENTS_ORG_DATABASE_SERVERS", None):
            with server_connection() as conn:
                names = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
            return [slug for slug in slugs if database_name(slug) in names]
        known = servers()
        # Every placement in one read (no IN list of 100,000 slugs: SQLite caps bound parameters).
        recorded = dict(OrgPlacement.objects.using("default").values_list("slug", "server"))
        legacy = _legacy_key()  # an org not placed yet has its database, if any, where it always was
        on: dict[str, set[str]] = {}
        for key in (set(recorded.values()) & set(known)) | {legacy}:
            with server_connection(known.get(key) or server_settings()) as conn:
                on[key] = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        return [slug for slug in slugs if database_name(slug) in on.get(recorded.get(slug, legacy), set())]

    def serialize(self, alias: str, key: str) -> None:
        """Take a transaction-level advisory lock on (`alias`'s database, `key`); wait for it.

        Released by the commit or rollback of the transaction it was taken in, so two
        transactions serialised on one key run one after the other even under READ COMMITTED.
        """
        with connections[alias].cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [advisory_key("org-serialize", alias, key)])
