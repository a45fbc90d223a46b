"""Django's SQLite engine, with the connections a request hands back kept open for the next one.

Every request ends by closing its connections (`CONN_MAX_AGE = 0`: nothing outlives a request's
context, and under ASGI each request has its own context anyway). For SQLite a close is not
free: a fresh connection registers Django's SQL functions and runs the WAL pragmas, and the
last connection to close a WAL database checkpoints it and deletes its `-wal` file — together
about a third of a single event append's CPU (BENCHMARKS.md, issue 16). Here `close()` hands
the `sqlite3.Connection` back to a per-process idle pool instead, and the next `connect()` of
the same file takes it (Django's PostgreSQL pool does the same for PostgreSQL).

What keeps a reused connection as good as a new one:

* Only a connection closed outside any atomic block, with no transaction open (rolled back if
  one is), goes back; one closed inside an atomic block is really closed (Django still
  references it).
* The file's identity (device, inode) is recorded when the connection is opened; a pooled
  connection whose file was deleted or replaced (an org restored from its backup, a test's
  store rebuilt) is never reused — and never closed either, but leaked (`leak`): closing the
  last connection of a WAL database checkpoints it and deletes its `-wal` file *by name*,
  which by then is the new file's WAL (its committed pages lost, "disk I/O error" after). The
  same holds when the pool is drained (`close_pool()`, called when an org alias is
  unregistered, closes a file's idle connections at once) and at the process's exit.
* `PRAGMA foreign_keys = ON` is restored on reuse (a migration may have turned it off).
* Bounded: at most `AGENTS_SQLITE_IDLE_PER_FILE` idle connections per file and
  `AGENTS_SQLITE_IDLE_CONNECTIONS` in the process (least recently used file first out).
* A fork (django-q's workers) never hands the parent's connections to the child: the pool is
  emptied before the fork, and a connection the child still inherits is never closed by it
  (`IdlePool.forget_after_fork` says why that matters).
* In-memory databases, and names that are not a file on disk, are never pooled.

Write transactions of one process also queue on a per-file lock before `BEGIN IMMEDIATE`.
SQLite makes a writer that finds the file locked sleep and retry (1, 2, 5, 10 … 100 ms steps,
up to the 30 s busy timeout), so eight threads appending to one org spent most of their tail
asleep (p99 369 ms). A thread now waits on a Python lock that wakes it the moment the writer
before it commits; other processes still meet SQLite's own lock as before. The lock is only a
queue, never the guarantee: past the busy timeout a writer goes on to `BEGIN IMMEDIATE`
without it, so two threads holding two files' locks in opposite order fare exactly as they
did with SQLite's locks alone.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import threading
from collections import OrderedDict

from django.conf import settings
from django.db.backends.sqlite3 import base as sqlite_base

_DEFAULT_PER_FILE = 8
_DEFAULT_TOTAL = 64


class IdlePool:
    """Idle `sqlite3.Connection`s by file, each with the file's (device, inode) when opened.

    `take(key, path)` → a connection or None; `give(key, path, conn, identity)` → None (closes
    the connection when the pool is full). Thread-safe; a connection is only ever in the pool
    or in one wrapper, never both.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: OrderedDict[tuple, list[tuple]] = OrderedDict()  # key → [(conn, identity)], LRU key order
        self._count = 0
        self._orphans: list = []  # a forked child's inherited connections: kept, never closed

    @staticmethod
    def identity(path: str) -> tuple[int, int] | None:
        """Return (st_dev, st_ino) of `path`, or None when it does not exist."""
        try:
            stat = os.stat(path)
        except OSError:
            return None
        return (stat.st_dev, stat.st_ino)

    def take(self, key: tuple, path: str):
        """Return an idle connection of `key` whose file is still `path`'s file, else None."""
        current = self.identity(path)
        stale = []
        found = None
        with self._lock:
            entries = self._idle.get(key)
            while entries and found is None:
                conn, identity = entries.pop()
                self._count -= 1
                if identity == current and current is not None:
                    found = (conn, identity)
                else:
                    stale.append(conn)
            if entries is not None and not entries:
                del self._idle[key]
        for conn in stale:
            self.leak(conn)  # its file was replaced or deleted: closing it could delete the new file's -wal
        return found

    def give(self, key: tuple, conn, identity) -> None:
        """Keep `conn` idle under `key`; close it (or the least recently used file's) when full."""
        per_file = max(0, int(getattr(settings, "AGENTS_SQLITE_IDLE_PER_FILE", _DEFAULT_PER_FILE)))
        total = max(0, int(getattr(settings, "AGENTS_SQLITE_IDLE_CONNECTIONS", _DEFAULT_TOTAL)))
        evicted = []
        with self._lock:
            entries = self._idle.setdefault(key, [])
            self._idle.move_to_end(key)
            if len(entries) >= per_file or total == 0:
                evicted.append((key[0], conn, identity))
            else:
                entries.append((conn, identity))
                self._count += 1
                while self._count > total:
                    oldest_key = next(iter(self._idle))
                    oldest = self._idle[oldest_key]
                    evicted.append((oldest_key[0], *oldest.pop(0)))
                    self._count -= 1
                    if not oldest:
                        del self._idle[oldest_key]
            if not entries and key in self._idle:
                del self._idle[key]
        for name, victim, victim_identity in evicted:
            if self.identity(name) == victim_identity:
                _close_quietly(victim)
            else:
                self.leak(victim)  # its file was replaced since: never close (see `take`)

    def drain(self, path: str | None = None) -> int:
        """Close the idle connections of file `path` (every file when None); return how many."""
        closed = []
        with self._lock:
            for key in [k for k in self._idle if path is None or k[0] == path]:
                closed.extend((key[0], conn, identity) for conn, identity in self._idle.pop(key))
            self._count -= len(closed)
        for name, conn, identity in closed:
            if self.identity(name) == identity:
                _close_quietly(conn)
            else:
                self.leak(conn)  # the file was replaced since: never close (see `take`)
        return len(closed)

    def idle_count(self, path: str | None = None) -> int:
        """Return how many idle connections the pool holds (for file `path` when given)."""
        with self._lock:
            return sum(len(v) for k, v in self._idle.items() if path is None or k[0] == path)

    def forget_after_fork(self) -> None:
        """In a forked child: drop every pooled connection without ever closing it.

        They are the parent's. A child closing an inherited WAL connection believes it is the
        last one (the parent's locks are not its own), checkpoints and deletes the `-wal` and
        `-shm` files under the parent, whose every later statement then fails "disk I/O
        error". So the parent empties the pool before it forks (`drain`, registered below),
        and whatever a thread handed back in between is leaked here on purpose: its reference
        count is raised once more, so not even the interpreter's exit frees (closes) it. A
        connection a wrapper of the child inherited in use is leaked the same way when the
        child closes it (`DatabaseWrapper._close` knows the pid that opened it).
        """
        self._lock = threading.Lock()
        for entries in self._idle.values():
            for conn, _ in entries:
                self.leak(conn)
        self._idle = OrderedDict()
        self._count = 0

    def leak_replaced(self) -> int:
        """Leak (never close) every idle connection whose file was replaced or deleted; return how many."""
        leaked = 0
        with self._lock:
            for key in list(self._idle):
                entries = self._idle[key]
                current = self.identity(key[0])
                for item in [e for e in entries if e[1] != current]:
                    entries.remove(item)
                    self.leak(item[0])
                    leaked += 1
                if not entries:
                    del self._idle[key]
            self._count -= leaked
        return leaked

    def leak(self, conn) -> None:
        """Keep `conn` referenced until the process ends, and past it: never closed by this process."""
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(conn))
        self._orphans.append(conn)


def _close_quietly(conn) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - a connection that will not close is dropped all the same
        pass


pool = IdlePool()
os.register_at_fork(before=pool.drain, after_in_child=pool.forget_after_fork)
# At exit the interpreter may free (close) what the pool holds, a replaced file's connections too.
atexit.register(pool.leak_replaced)


_write_locks: dict[str, threading.Lock] = {}
_write_locks_guard = threading.Lock()


def _forget_write_locks_after_fork() -> None:
    # A lock another thread of the parent held at the fork would stay held in the child forever.
    global _write_locks, _write_locks_guard
    _write_locks, _write_locks_guard = {}, threading.Lock()


os.register_at_fork(after_in_child=_forget_write_locks_after_fork)


def write_lock(path: str) -> threading.Lock:
    """Return the process's write-queue lock of SQLite file `path` (one per file, created once)."""
    lock = _write_locks.get(path)
    if lock is None:
        with _write_locks_guard:
            lock = _write_locks.setdefault(path, threading.Lock())
    return lock


class DatabaseWrapper(sqlite_base.DatabaseWrapper):
    """Django's SQLite `DatabaseWrapper` whose connections outlive `close()` in a per-process pool."""

    _pool_key: tuple | None = None
    _pool_identity: tuple[int, int] | None = None
    _opened_by: int = 0  # the pid that opened the current connection
    _held_write_lock: threading.Lock | None = None

    def _start_transaction_under_autocommit(self):
        """Queue behind this process's other writers of the file, then `BEGIN IMMEDIATE` (Django's)."""
        if self.transaction_mode in ("IMMEDIATE", "EXCLUSIVE") and self._pool_key is not None and self._held_write_lock is None:
            lock = write_lock(self._pool_key[0])
            timeout = float(self.settings_dict["OPTIONS"].get("timeout", 5))
            if lock.acquire(timeout=timeout):
                self._held_write_lock = lock
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._release_write_lock()
            raise

    def _release_write_lock(self) -> None:
        lock, self._held_write_lock = self._held_write_lock, None
        if lock is not None:
            lock.release()

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._release_write_lock()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._release_write_lock()

    def _pool_key_for(self, conn_params: dict) -> tuple | None:
        if self.is_in_memory_db():
            return None
        return (str(conn_params["database"]), repr(sorted((k, repr(v)) for k, v in conn_params.items())), tuple(self.init_commands))

    def get_new_connection(self, conn_params):
        """Return an idle connection of the same file and parameters, else a new one (Django's)."""
        key = self._pool_key_for(conn_params)
        self._pool_key = key
        if key is not None:
            found = pool.take(key, key[0])
            if found is not None:
                conn, self._pool_identity = found
                conn.execute("PRAGMA foreign_keys = ON")
                self._opened_by = os.getpid()
                return conn
        conn = super().get_new_connection(conn_params)
        self._pool_identity = pool.identity(key[0]) if key is not None else None
        self._opened_by = os.getpid()
        return conn

    def _close(self):
        """Hand the connection back to the pool when it is clean and idle; really close it otherwise."""
        self._release_write_lock()
        conn = self.connection
        if conn is not None and self._opened_by and self._opened_by != os.getpid():
            pool.leak(conn)  # inherited across a fork: only the process that opened it closes it
            return None
        key = self._pool_key
        if conn is not None and key is not None and self._pool_identity is not None and not self.in_atomic_block:
            try:
                if conn.in_transaction:
                    conn.rollback()
                conn.isolation_level = None  # autocommit, as every connect() leaves it
            except Exception:  # noqa: BLE001 - an unusable connection is closed below, not pooled
                return super()._close()
            pool.give(key, conn, self._pool_identity)
            return None
        return super()._close()

    def close_pool(self):
        """Close every idle connection of this wrapper's file (the alias is being unregistered)."""
        pool.drain(str(self.settings_dict["NAME"]))
