"""SQLite org stores: the file `{AGENTS_DATA_DIR}/orgs/{slug}/agents.db` per org.

A new org file is a copy of a template migrated once per code version (the hash of the org
apps' migration files), so an org's first request costs a file copy, not a migration.
Concurrent first use of one org from several threads or processes ends with one good file:
each copies to a private temporary name and `os.link`s it into place, which fails if another
won. Write transactions open with BEGIN IMMEDIATE, so they already exclude each other.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import sqlite3
import threading
import uuid
from pathlib import Path

from django.conf import settings

from tenancy import registry
from tenancy.backends.base import ORG_APP_LABELS, OrgStoreBackend, default_settings_copy, migrate

logger = logging.getLogger(__name__)

_template_lock = threading.Lock()
_code_version: str | None = None


def data_dir() -> Path:
    """Return `AGENTS_DATA_DIR` as a path."""
    return Path(settings.AGENTS_DATA_DIR)


def store_path(slug: str) -> Path:
    """Return the SQLite file of (validated) org `slug`: `{AGENTS_DATA_DIR}/orgs/{slug}/agents.db`."""
    return data_dir() / "orgs" / slug / "agents.db"


def autocheckpoint_pages() -> int:
    """Return the WAL pages past which an app connection checkpoints by itself.

    1,000 (SQLite's default) without replication; with `AGENTS_BACKUP_URL` set, 10,000:
    Litestream owns checkpointing then (it checkpoints at 1,000 pages, holding a read
    transaction so no checkpoint resets the WAL before it has shipped it) and the app's own
    only runs if `manage.py replicate` is stopped and the WAL keeps growing.
    """
    return 10_000 if getattr(settings, "AGENTS_BACKUP_URL", "") else 1000


def sqlite_settings(name: Path | str) -> dict:
    """Return the `DATABASES` entry of an org-shaped SQLite file at `name`.

    WAL, `synchronous=NORMAL`, foreign keys on, 30 s busy timeout, BEGIN IMMEDIATE writes; the
    automatic checkpoint at `autocheckpoint_pages()` WAL pages.
    """
    base = default_settings_copy()
    base.update(
        {
            "ENGINE": settings.SQLITE_ENGINE,
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
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; "
                                f"PRAGMA wal_autocheckpoint={autocheckpoint_pages()};",
            },
            "TEST": {"NAME": str(name)},
        }
    )
    return base


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


def template_path() -> Path:
    """Return the migrated template file for this code version, building it once if absent.

    Built under a thread lock and an `flock`, migrated at a private name, then renamed into
    place, so concurrent builders never expose a half-migrated template.
    """
    version = code_version()
    path = data_dir() / "templates" / f"org-{version}.db"
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with _template_lock, open(path.with_suffix(".lock"), "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        if path.exists():
            return path
        building = path.with_name(f"{path.name}.building-{os.getpid()}")
        building.unlink(missing_ok=True)
        alias = f"{registry.TEMPLATE_PREFIX}{version}_{os.getpid()}"
        registry.register(alias, sqlite_settings(building))
        try:
            migrate(alias)
        finally:
            registry.unregister(alias)
        with contextlib.closing(sqlite3.connect(building)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.execute("PRAGMA journal_mode=DELETE")
        for suffix in ("-wal", "-shm"):
            Path(str(building) + suffix).unlink(missing_ok=True)
        os.replace(building, path)
        logger.info("built org template %s", path)
    return path


class SQLiteBackend(OrgStoreBackend):
    """One SQLite file per org, copied from the migrated template on first use."""

    kind = "sqlite"

    def settings_for(self, slug: str) -> dict:
        """Return the `DATABASES` entry of org `slug`'s file."""
        return sqlite_settings(store_path(slug))

    def provision(self, slug: str, alias: str) -> None:
        """Copy the template to org `slug`'s file unless it exists (one winner across processes)."""
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

    def ensure_templates(self) -> list[str]:
        """Build this code version's template file if absent; return its path."""
        return [str(template_path())]

    def exists(self, slug: str) -> bool:
        """Return True when org `slug`'s file exists."""
        return store_path(slug).exists()


def drop_stale_connection(alias: str) -> bool:
    """Drop this thread's open connection of `alias` if its file was replaced since; say so.

    A thread keeps its connection between frames only outside requests (a shell, a test, a
    worker between tasks); an org restored from its backup is a new file (a new inode), and such
    a connection would still read and write the old one. It is closed the engine's way, which
    hands it to the pool, and the pool never reuses (nor closes) a replaced file's connection.
    """
    from django.db import connections

    connection = connections[alias]
    identity = getattr(connection, "_pool_identity", None)
    if connection.connection is None or identity is None or connection.in_atomic_block:
        return False
    try:
        stat = os.stat(connection.settings_dict["NAME"])
        current = (stat.st_dev, stat.st_ino)
    except OSError:
        current = None
    if current == identity:
        return False
    with contextlib.suppress(Exception):
        connection.close()
    return True
