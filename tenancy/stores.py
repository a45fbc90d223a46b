"""The only door to an org's store: resolves an org slug to a database alias.

Each org's agents, runs, sessions, events, targets and claim keys live in that org's own
database: by default the SQLite file `{AGENTS_DATA_DIR}/orgs/{slug}/agents.db`; with
`AGENTS_ORG_DATABASE=postgres`, the PostgreSQL database `agents_org_{slug}` on `DATABASE_URL`'s
server. The kind is one backend (`tenancy.backends`), chosen in one place (`get_backend`). This
module is the only one that turns an org into an alias (a test scans the sources for it).

The current org is a `ContextVar` set and reset in one frame (`org_context`, the middleware,
the stream, the task). The router (`tenancy.db_router`) asks `current_alias()` for every org
model and fails closed when no org is set. Every org transaction opens through `org_atomic()`
(a test scans the org apps for any other `atomic`).

Provisioning runs under a per-org lock, so a slow one (postgres: CREATE DATABASE and migrate)
never stalls other orgs; registered aliases are a bounded LRU (`tenancy.registry`) that never
evicts an alias some thread acts for.

Every frame acting for an org passes the org's restore fence (`tenancy.backups.fence`): while
`manage.py restore_org` replaces the org's store it raises `StoreUnavailable(restoring)` (503),
and the restore waits for frames already inside, in every process, before it swaps the file.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from pathlib import Path

from django.db import connections, transaction

from tenancy import registry
from tenancy.backends import get_backend, postgres as _postgres, sqlite as _sqlite
from tenancy.backends.base import ORG_APP_LABELS, migrate
from tenancy.backups import fence
from tenancy.slugs import SLUG_RE, InvalidOrg, validate_slug
from tenancy.models import Org

__all__ = [
    "ORG_APP_LABELS", "SLUG_RE", "InvalidOrg", "NoOrgSelected", "StoreMissing", "validate_slug", "is_org_alias",
    "store_path", "postgres_database_name", "code_version", "template_path", "open_store", "close_store", "store_exists",
    "open_existing_store", "current_org", "current_alias", "set_current", "reset_current", "org_context",
    "org_atomic", "existing_org_slugs", "migrate_store", "ensure_templates", "check_available", "release_connections",
]

_current_org: contextvars.ContextVar[str | None] = contextvars.ContextVar("agents_current_org", default=None)
# One lock per alias being provisioned: a new org's copy (or, in postgres mode, its CREATE
# DATABASE and migration, seconds) never stalls the queries of every other org.
_provision_locks: dict[str, threading.Lock] = {}
_provisioned: set[str] = set()  # aliases whose store is known to exist (never shrinks)

code_version = _sqlite.code_version
template_path = _sqlite.template_path
is_org_alias = registry.is_org_alias


class NoOrgSelected(RuntimeError):
    """An org model was touched with no current org: the router never falls back to default."""


class StoreMissing(LookupError):
    """The org has no store yet (raised only by the non-creating resolver)."""


def _alias(slug: str) -> str:
    return registry.ALIAS_PREFIX + validate_slug(slug)


def store_path(slug: str) -> Path:
    """Return the SQLite file of org `slug`: `{AGENTS_DATA_DIR}/orgs/{slug}/agents.db`.

    Raises `InvalidOrg` for a bad slug (before any path is built).
    """
    return _sqlite.store_path(validate_slug(slug))


def postgres_database_name(slug: str) -> str:
    """Return the PostgreSQL database name of org `slug`: `agents_org_{slug}` (`InvalidOrg` if bad)."""
    return _postgres.database_name(validate_slug(slug))


def open_store(slug: str) -> str:
    """Return the database alias of org `slug`, creating its store on first use.

    Raises `InvalidOrg` for a bad slug (before any path is built). Thread- and process-safe.
    """
    alias = _alias(slug)
    if registry.touch(alias):
        return alias
    backend = get_backend()
    with registry.lock:
        provision_lock = _provision_locks.setdefault(alias, threading.Lock())
    with provision_lock:
        if alias not in _provisioned:
            backend.provision(slug, alias)
            _provisioned.add(alias)
    registry.admit(alias, backend.settings_for(slug))
    return alias


def close_store(slug: str) -> bool:
    """Drop org `slug`'s alias from this process: its connections and pool closed, settings forgotten.

    The next use registers it again from fresh settings (e.g. after the file was replaced or
    its limits changed). Returns False, and drops nothing, while some frame acts for the org.
    """
    return registry.evict(_alias(slug))


def store_exists(slug: str) -> bool:
    """Return True when org `slug` already has a store (never creates one)."""
    try:
        validate_slug(slug)
    except InvalidOrg:
        return False
    if _alias(slug) in _provisioned:
        return True
    return get_backend().exists(slug)


def open_existing_store(slug: str) -> str:
    """Return the alias of org `slug` only if its store exists; never create one.

    For public routes (the builds gallery). Raises `StoreMissing` (also for an invalid slug).
    """
    if not store_exists(slug):
        raise StoreMissing(slug)
    return open_store(slug)


def _acquire(slug: str) -> str:
    while True:  # provisioning runs outside the registry lock: re-check the alias is still there
        alias = open_store(slug)
        if registry.hold(alias):
            break
    try:
        fence.enter(slug)  # StoreUnavailable(restoring) while the org is being restored
    except BaseException:
        registry.let_go(alias)
        raise
    if get_backend().kind == "sqlite":
        _sqlite.drop_stale_connection(alias)  # a file replaced by a restore: never read the old one
    return alias


def _release(slug: str) -> None:
    fence.leave(slug)
    registry.let_go(_alias(slug))


def check_available(slug: str) -> None:
    """Raise `StoreUnavailable` (503, `condition: restoring`) while org `slug` is being restored.

    Every frame acting for the org checks it anyway (`set_current`, `org_context`); the request
    middleware calls this first, on its thread, so PostgreSQL mode reads the flag there.
    """
    fence.check(validate_slug(slug))


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
def _serialized_atomic(alias: str, key: str, kwargs: dict) -> Iterator[None]:
    with transaction.atomic(using=alias, **kwargs):
        get_backend().serialize(alias, key)
        yield


def org_atomic(*, serialize: bool | str = False, **kwargs):
    """Return a transaction (`transaction.atomic`) on the current org's store, not on `default`.

    Org writes that must hold together (check then insert, runs then agent) use this: a bare
    `transaction.atomic()` opens its transaction on `default` and leaves the org store in
    autocommit. `kwargs` go to `transaction.atomic` (`savepoint`, `durable`).

    `serialize=True` (or a key string naming a narrower scope) also makes the transaction wait
    until no other transaction serialised on the same org and key is open, for check-then-insert
    rules that READ COMMITTED would let two transactions pass at once (a cap, a balance). In
    PostgreSQL mode that is a transaction-level advisory lock taken first in the transaction;
    SQLite's BEGIN IMMEDIATE already serialises every write transaction of an org.

    Must run inside an org context (`NoOrgSelected` otherwise).
    """
    alias = current_alias()
    if serialize:
        return _serialized_atomic(alias, "org" if serialize is True else str(serialize), kwargs)
    return transaction.atomic(using=alias, **kwargs)


def release_connections() -> int:
    """Hand back every database connection this thread holds outside a transaction; return how many.

    Called before a thread waits on something slow (a model call, a stream's whole life): a
    waiting run holds no connection (issue 26), so the pools bound transactions in flight, not
    runs. A pooled connection goes back to its pool (PostgreSQL, pooled SQLite), an unpooled one
    is closed (reopened by the next query, a fraction of a millisecond). Connections inside an
    open transaction (`atomic`, e.g. a test's) are left alone.
    """
    released = 0
    for conn in connections.all(initialized_only=True):
        if conn.connection is not None and not conn.in_atomic_block:
            conn.close()
            released += 1
    return released


def existing_org_slugs() -> list[str]:
    """Return the slugs of every org that has a store, sorted (for cross-org sweeps)."""
    slugs = [s for s in Org.objects.order_by("slug").values_list("slug", flat=True) if SLUG_RE.fullmatch(s)]
    return get_backend().existing(slugs)


def migrate_store(slug: str) -> str:
    """Open org `slug`'s store and apply every pending migration to it; return its alias."""
    with org_context(slug) as alias:
        migrate(alias)
    return alias


def ensure_templates() -> list[str]:
    """Build this code version's org store template everywhere new stores are made (the SQLite
    template file; in PostgreSQL mode a template database on every configured server); return where."""
    return get_backend().ensure_templates()
