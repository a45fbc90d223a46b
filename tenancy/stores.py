"""The only door to an org's store: resolves an org slug to a database alias.

Each org's agents, runs, sessions, events, targets and claim keys live in that org's own
database: by default the SQLite file `{AGENTS_DATA_DIR}/orgs/{slug}/agents.db`; with
`AGENTS_ORG_DATABASE=postgres`, the PostgreSQL database `agents_org_{slug}` on `DATABASE_URL`'s
server. No other module builds an alias or a store path (a test scans the sources for it).

The current org is a `ContextVar` set and reset in one frame (`org_context`, the middleware,
the stream, the task). The router (`tenancy.db_router`) asks `current_alias()` for every org
model and fails closed when no org is set.

A new SQLite org file is a copy of a template migrated once per code version (the hash of the
org apps' migration files), so an org's first request costs a file copy, not a migration.
Concurrent first use of one org from several threads or processes ends with one good file: each
copies to a private temporary name and `os.link`s it into place, which fails if another won.
Provisioning runs under a per-org lock, so a slow one (postgres: CREATE DATABASE and migrate)
never stalls other orgs; `connections.settings` is replaced, never mutated, so a thread walking
it is never broken; an alias some thread acts for is never evicted from the LRU.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import fcntl
import hashlib
import logging
import os
import re
import shutil
import sqlite3
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings
from django.db import connections, transaction

logger = logging.getLogger(__name__)

#: App labels whose models live in an org's store, never in `default`.
ORG_APP_LABELS = frozenset({"agents", "agent_sessions", "targets"})

SLUG_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_ALIAS_PREFIX = "org_"
_TEMPLATE_PREFIX = "orgtemplate_"

_current_org: contextvars.ContextVar[str | None] = contextvars.ContextVar("agents_current_org", default=None)
# Guards `_ready`, `_in_use` and every change to `connections.settings`; held only briefly.
_lock = threading.RLock()
_template_lock = threading.Lock()
# One lock per alias being provisioned: a new org's copy (or, in postgres mode, its CREATE
# DATABASE and migration, seconds) never stalls the queries of every other org.
_provision_locks: dict[str, threading.Lock] = {}
# Aliases registered in `connections.settings`, least recently used first. Django walks every
# registered alias twice per request (`reset_queries`, `close_old_connections`), so the number
# kept registered is capped (`AGENTS_STORE_CACHE_SIZE`) to keep a request's cost independent
# of how many orgs the process has served.
_ready: OrderedDict[str, None] = OrderedDict()
_provisioned: set[str] = set()  # aliases whose store is known to exist (never shrinks)
# How many frames of any thread act for each alias right now (`set_current`, `org_context`).
# Eviction skips these: another thread between its router call and `connections[alias]` would
# otherwise find the alias gone (`ConnectionDoesNotExist`).
_in_use: Counter[str] = Counter()
_code_version: str | None = None


class InvalidOrg(ValueError):
    """The org slug does not match `^[a-z0-9][a-z0-9-]{0,62}$`; no path was built."""


class NoOrgSelected(RuntimeError):
    """An org model was touched with no current org: the router never falls back to default."""


class StoreMissing(LookupError):
    """The org has no store yet (raised only by the non-creating resolver)."""


def validate_slug(slug: object) -> str:
    """Return `slug` if it is a valid org slug, else raise `InvalidOrg`.

    Valid: `^[a-z0-9][a-z0-9-]{0,62}$` (so `../x`, `A`, `""` and 4096 characters are refused).
    """
    if not isinstance(slug, str) or not SLUG_RE.fullmatch(slug):
        raise InvalidOrg("invalid org")
    return slug


def is_org_alias(alias: str) -> bool:
    """Return True when `alias` names an org store or the org template (not `default`)."""
    return alias.startswith(_ALIAS_PREFIX) or alias.startswith(_TEMPLATE_PREFIX)


def _alias(slug: str) -> str:
    return _ALIAS_PREFIX + validate_slug(slug)


def _mode() -> str:
    return getattr(settings, "AGENTS_ORG_DATABASE", "sqlite")


def _data_dir() -> Path:
    return Path(settings.AGENTS_DATA_DIR)


def store_path(slug: str) -> Path:
    """Return the SQLite file of org `slug`: `{AGENTS_DATA_DIR}/orgs/{slug}/agents.db`."""
    return _data_dir() / "orgs" / validate_slug(slug) / "agents.db"


def _sqlite_settings(name: Path) -> dict:
    base = copy.deepcopy(connections.settings["default"])
    base.update(
        {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(name),
            "USER": "",
            "PASSWORD": "",
            "HOST": "",
            "PORT": "",
            "CONN_MAX_AGE": 0,
            "ATOMIC_REQUESTS": False,
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,  # seconds: sqlite3's busy timeout
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;",
            },
            "TEST": {"NAME": str(name)},
        }
    )
    return base


def _postgres_server_settings() -> dict:
    import dj_database_url

    url = os.environ.get("DATABASE_URL", "")
    if not url:
        raise RuntimeError("AGENTS_ORG_DATABASE=postgres needs DATABASE_URL")
    parsed = dj_database_url.parse(url, conn_max_age=0)
    if "postgresql" not in parsed["ENGINE"]:
        raise RuntimeError("AGENTS_ORG_DATABASE=postgres needs a postgres:// DATABASE_URL")
    return parsed


def postgres_database_name(slug: str) -> str:
    """Return the PostgreSQL database name of org `slug`: `agents_org_{slug}`."""
    return "agents_org_" + validate_slug(slug)


def _postgres_settings(slug: str) -> dict:
    base = copy.deepcopy(connections.settings["default"])
    server = _postgres_server_settings()
    base.update({k: server[k] for k in ("ENGINE", "USER", "PASSWORD", "HOST", "PORT")})
    base.update(
        {
            "NAME": postgres_database_name(slug),
            "OPTIONS": server.get("OPTIONS", {}),
            "CONN_MAX_AGE": 0,
            "ATOMIC_REQUESTS": False,
            "TEST": {"NAME": postgres_database_name(slug)},
        }
    )
    return base


def _register(alias: str, settings_dict: dict) -> None:
    # Caller holds _lock. Never `connections[alias] = …`: the handler builds a per-thread
    # connection from settings. Copy-on-write: Django iterates `connections.settings` around
    # every request (`connections.all()`), and a dict grown in place under another thread's
    # iteration raises "dictionary changed size during iteration".
    if alias not in connections.settings:
        connections.settings = {**connections.settings, alias: settings_dict}


def _unregister(alias: str) -> None:
    # Caller holds _lock. Copy-on-write, as `_register`.
    with contextlib.suppress(Exception):
        connections[alias].close()
    if alias in connections.settings:
        connections.settings = {k: v for k, v in connections.settings.items() if k != alias}
    with contextlib.suppress(AttributeError):
        delattr(connections._connections, alias)


def code_version() -> str:
    """Return the hash (16 hex) of the org apps' migration files: the template's version."""
    global _code_version
    if _code_version is None:
        from django.apps import apps

        digest = hashlib.sha256()
        for label in sorted(ORG_APP_LABELS):
            mig_dir = Path(apps.get_app_config(label).path) / "migrations"
            for path in sorted(mig_dir.glob("*.py")):
                digest.update(path.name.encode())
                digest.update(path.read_bytes())
        _code_version = digest.hexdigest()[:16]
    return _code_version


def _migrate(alias: str) -> None:
    from django.core.management import call_command

    call_command("migrate", database=alias, verbosity=0, interactive=False, skip_checks=True)


def template_path() -> Path:
    """Return the migrated template file for this code version, building it once if absent.

    Built under a thread lock and an `flock`, migrated at a private name, then renamed into
    place, so concurrent builders never expose a half-migrated template.
    """
    version = code_version()
    path = _data_dir() / "templates" / f"org-{version}.db"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _template_lock, open(path.with_suffix(".lock"), "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        if path.exists():
            return path
        building = path.with_name(f"{path.name}.building-{os.getpid()}")
        building.unlink(missing_ok=True)
        alias = f"{_TEMPLATE_PREFIX}{version}_{os.getpid()}"
        with _lock:
            _register(alias, _sqlite_settings(building))
        try:
            _migrate(alias)
        finally:
            with _lock:
                _unregister(alias)
        with contextlib.closing(sqlite3.connect(building)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
        for suffix in ("-wal", "-shm"):
            Path(str(building) + suffix).unlink(missing_ok=True)
        os.replace(building, path)
        logger.info("built org template %s", path)
    return path


def _provision_sqlite(slug: str) -> None:
    path = store_path(slug)
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    private = path.with_name(f".agents.db.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex}")
    shutil.copyfile(template_path(), private)
    try:
        os.link(private, path)  # atomic, and fails if another provisioner won
    except FileExistsError:
        pass
    finally:
        private.unlink(missing_ok=True)


def _server_connection():
    """Open an autocommit psycopg connection to DATABASE_URL's database (for CREATE DATABASE)."""
    import psycopg

    server = _postgres_server_settings()
    keys = {"host": "HOST", "port": "PORT", "user": "USER", "password": "PASSWORD"}
    conninfo = {k: server.get(v) for k, v in keys.items() if server.get(v)}
    return psycopg.connect(dbname=server.get("NAME") or "postgres", autocommit=True, **conninfo)


def _provision_postgres(slug: str, alias: str) -> None:
    from psycopg import sql

    dbname = postgres_database_name(slug)
    with _server_connection() as conn:
        # One advisory lock per org serialises creation and migration across processes.
        lock_key = int.from_bytes(hashlib.sha256(dbname.encode()).digest()[:8], "big", signed=True)
        conn.execute("SELECT pg_advisory_lock(%s)", (lock_key,))
        try:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
            from django.db.migrations.executor import MigrationExecutor

            executor = MigrationExecutor(connections[alias])
            targets = executor.loader.graph.leaf_nodes()
            if executor.migration_plan(targets):
                _migrate(alias)
            connections[alias].close()
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (lock_key,))


def _cache_size() -> int:
    return max(8, int(getattr(settings, "AGENTS_STORE_CACHE_SIZE", 64)))


def _evict_least_recent(keep: str) -> None:
    # Caller holds _lock. An evicted alias is registered again on its next use. Aliases some
    # thread is acting for are never evicted (`_in_use`), so the cache may briefly exceed its
    # size while more orgs than that are busy at once.
    for alias in list(_ready):
        if len(_ready) <= _cache_size():
            return
        if alias != keep and not _in_use[alias]:
            _ready.pop(alias)
            _unregister(alias)


def _acquire(slug: str) -> str:
    while True:  # provisioning runs outside _lock, so re-check the alias is still registered
        alias = open_store(slug)
        with _lock:
            if alias in _ready:
                _in_use[alias] += 1
                return alias


def _release(slug: str) -> None:
    alias = _ALIAS_PREFIX + slug
    with _lock:
        _in_use[alias] -= 1
        if _in_use[alias] <= 0:
            del _in_use[alias]


def open_store(slug: str) -> str:
    """Return the database alias of org `slug`, creating its store on first use.

    Raises `InvalidOrg` for a bad slug (before any path is built). Thread- and process-safe.
    """
    alias = _alias(slug)
    with _lock:
        if alias in _ready:
            _ready.move_to_end(alias)
            return alias
        provision_lock = _provision_locks.setdefault(alias, threading.Lock())
    postgres = _mode() == "postgres"
    with provision_lock:
        if alias not in _provisioned:
            if postgres:
                with _lock:
                    _register(alias, _postgres_settings(slug))
                _provision_postgres(slug, alias)
            else:
                _provision_sqlite(slug)
            _provisioned.add(alias)
    with _lock:
        if alias in _ready:
            _ready.move_to_end(alias)
        else:
            _register(alias, _postgres_settings(slug) if postgres else _sqlite_settings(store_path(slug)))
            _ready[alias] = None
            _evict_least_recent(keep=alias)
    return alias


def store_exists(slug: str) -> bool:
    """Return True when org `slug` already has a store (never creates one)."""
    try:
        validate_slug(slug)
    except InvalidOrg:
        return False
    if _alias(slug) in _provisioned:
        return True
    if _mode() == "postgres":
        with _server_connection() as conn:
            return bool(conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (postgres_database_name(slug),)).fetchone())
    return store_path(slug).exists()


def open_existing_store(slug: str) -> str:
    """Return the alias of org `slug` only if its store exists; never create one.

    For public routes (the builds gallery). Raises `StoreMissing` (also for an invalid slug).
    """
    if not store_exists(slug):
        raise StoreMissing(slug)
    return open_store(slug)


def current_org() -> str | None:
    """Return the slug of the org this frame acts for, or None."""
    return _current_org.get()


def current_alias() -> str:
    """Return the alias of the current org's store; raise `NoOrgSelected` when none is set."""
    slug = _current_org.get()
    if slug is None:
        raise NoOrgSelected("an org model was used with no org selected")
    return open_store(slug)


def set_current(slug: str) -> contextvars.Token:
    """Open `slug`'s store and make it current; return the token for `reset_current`.

    The store stays registered until the matching `reset_current` (never evicted meanwhile).
    """
    _acquire(slug)
    return _current_org.set(slug)


def reset_current(token: contextvars.Token) -> None:
    """Undo the matching `set_current`."""
    slug = _current_org.get()
    _current_org.reset(token)
    if slug is not None:
        _release(slug)


@contextlib.contextmanager
def org_context(slug: str, *, create: bool = True) -> Iterator[str]:
    """Act for org `slug` inside the block; yield its alias (registered for the whole block).

    With `create=False` the store must already exist (`StoreMissing` otherwise).
    """
    if not create and not store_exists(slug):
        raise StoreMissing(slug)
    alias = _acquire(slug)
    token = _current_org.set(slug)
    try:
        yield alias
    finally:
        _current_org.reset(token)
        _release(slug)


@contextlib.contextmanager
def org_atomic(*, serialize: bool = False, **kwargs) -> Iterator[str]:
    """Run the block in one transaction on the current org's store (not on `default`); yield its alias.

    Org writes that must hold together (check then insert, runs then agent) use this: a bare
    `transaction.atomic()` opens its transaction on `default` and leaves the org store in
    autocommit. With `serialize=True` the transaction is also serialised against every other
    serialising transaction of the org, so a count-then-insert (the balance gate, the
    long-running cap) cannot be passed twice on the same last place: on PostgreSQL (READ
    COMMITTED) a transaction-level advisory lock on the org; on SQLite nothing more is needed
    (its transactions are `BEGIN IMMEDIATE`: one writer per file at a time). Must run inside
    an org context (`NoOrgSelected` otherwise).
    """
    alias = current_alias()
    with transaction.atomic(using=alias, **kwargs):
        connection = connections[alias]
        if serialize and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_serialize_key(current_org())])
        yield alias


def _serialize_key(slug: str) -> int:
    """Return the signed 64-bit advisory-lock key serialising org `slug`'s gated writes."""
    return int.from_bytes(hashlib.sha256(f"agents-org-serialize:{slug}".encode()).digest()[:8], "big", signed=True)


def existing_org_slugs() -> list[str]:
    """Return the slugs of every org that has a store, sorted (for cross-org sweeps)."""
    from tenancy.models import Org

    slugs = list(Org.objects.order_by("slug").values_list("slug", flat=True))
    if _mode() == "postgres":  # one query for all orgs, not one connection per org
        with _server_connection() as conn:
            names = {row[0] for row in conn.execute("SELECT datname FROM pg_database")}
        return [slug for slug in slugs if SLUG_RE.fullmatch(slug) and postgres_database_name(slug) in names]
    return [slug for slug in slugs if store_exists(slug)]


def migrate_store(slug: str) -> str:
    """Open org `slug`'s store and apply every pending migration to it; return its alias."""
    with org_context(slug) as alias:
        _migrate(alias)
    return alias
