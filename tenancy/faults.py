"""Tell the database faults a client can be told about from the ones it cannot.

A pool that stayed exhausted for its whole wait (or SQLite's write lock held past its busy
timeout) is overload: 503 `store_busy` with `Retry-After`. A store that refuses writes (a
read-only file, a read-only PostgreSQL database) or has no room (SQLite's size limit, a full
disk) is 503 `store_unavailable` naming the condition. Everything else stays an internal error.
Django wraps driver errors in its own (`django.db.utils.*`); the driver's error is found on the
`__cause__` chain.
"""

from __future__ import annotations

import sqlite3

from agents_site.errors import ApiError, StoreBusy, StoreUnavailable
from agents_site.vocabulary import StoreCondition

# sqlite3's extended error names (Python 3.11+ `sqlite_errorname`), by what they mean here.
_SQLITE_READ_ONLY = "SQLITE_READONLY"  # and its extended forms SQLITE_READONLY_*
_SQLITE_FULL = "SQLITE_FULL"
_SQLITE_BUSY = "SQLITE_BUSY"  # and SQLITE_BUSY_* ("database is locked" past the busy timeout)
# PostgreSQL SQLSTATEs: read_only_sql_transaction, disk_full.
_PG_READ_ONLY = "25006"
_PG_DISK_FULL = "53100"


def _chain(exc: BaseException):
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def _is_pool_timeout(exc: BaseException) -> bool:
    try:
        from psycopg_pool import PoolTimeout
    except ImportError:  # pragma: no cover — psycopg-pool is a requirement
        return False
    return isinstance(exc, PoolTimeout)


def store_fault(exc: BaseException) -> ApiError | None:
    """Return the 503 error `exc` (or an error it was raised from) stands for, or None.

    `StoreBusy` for a pool wait that timed out (`psycopg_pool.PoolTimeout`) or SQLite's
    SQLITE_BUSY; `StoreUnavailable(READ_ONLY)` for SQLITE_READONLY* or SQLSTATE 25006;
    `StoreUnavailable(FULL)` for SQLITE_FULL or SQLSTATE 53100. None for anything else.
    """
    for err in _chain(exc):
        if isinstance(err, (StoreBusy, StoreUnavailable)):  # raised as such (an org being restored)
            return err
        if _is_pool_timeout(err):
            return StoreBusy()
        if isinstance(err, sqlite3.Error):
            name = getattr(err, "sqlite_errorname", "") or ""
            if name.startswith(_SQLITE_READ_ONLY):
                return StoreUnavailable(StoreCondition.READ_ONLY)
            if name == _SQLITE_FULL:
                return StoreUnavailable(StoreCondition.FULL)
            if name.startswith(_SQLITE_BUSY):
                return StoreBusy()
        sqlstate = getattr(err, "sqlstate", None)
        if sqlstate == _PG_READ_ONLY:
            return StoreUnavailable(StoreCondition.READ_ONLY)
        if sqlstate == _PG_DISK_FULL:
            return StoreUnavailable(StoreCondition.FULL)
    return None
