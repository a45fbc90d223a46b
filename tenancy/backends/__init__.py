"""Kinds of org store (`AGENTS_ORG_DATABASE`): one SQLite file per org, or one PostgreSQL database.

`get_backend()` returns the one chosen by settings; `tenancy.stores` is the only caller.
"""

from __future__ import annotations

from django.conf import settings

from tenancy.backends.base import OrgStoreBackend

_instances: dict[str, OrgStoreBackend] = {}


def get_backend() -> OrgStoreBackend:
    """Return the backend named by `settings.AGENTS_ORG_DATABASE` (`sqlite` or `postgres`).

    Read on every call (tests switch it per test); each kind is built once per process.
    Raises `RuntimeError` for an unknown kind.
    """
    kind = getattr(settings, "AGENTS_ORG_DATABASE", "sqlite")
    backend = _instances.get(kind)
    if backend is None:
        if kind == "sqlite":
            from tenancy.backends.sqlite import SQLiteBackend as cls  # only the configured kind is loaded
        elif kind == "postgres":
            from tenancy.backends.postgres import PostgresBackend as cls  # only the configured kind is loaded
        else:
            raise RuntimeError(f"AGENTS_ORG_DATABASE must be sqlite or postgres, not {kind!r}")
        backend = _instances.setdefault(kind, cls())
    return backend
