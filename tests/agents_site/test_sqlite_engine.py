"""The SQLite engine that keeps idle connections for reuse (agents_site/db_backends/sqlite3).

Each test builds its own wrapper on a file of its own, so nothing here touches the test
databases, and asserts what a reused connection may and may not carry over.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import threading
import time

import pytest
from agents_site.db_backends.sqlite3.base import DatabaseWrapper, pool, write_lock
from tenancy.backends.sqlite import sqlite_settings


def _wrapper(path) -> DatabaseWrapper:
    settings = sqlite_settings(path)
    settings.setdefault("TIME_ZONE", None)
    settings.setdefault("CONN_HEALTH_CHECKS", False)
    settings.setdefault("AUTOCOMMIT", True)
    return DatabaseWrapper(settings, alias=f"enginetest_{os.getpid()}_{threading.get_ident()}")


def _raw_id(wrapper: DatabaseWrapper) -> int:
    wrapper.ensure_connection()
    return id(wrapper.connection)


@pytest.fixture
def db_file(tmp_path, django_db_blocker):
    """A file of the test's own (not a test database): the wrappers here may connect to it."""
    path = tmp_path / "engine.db"
    with django_db_blocker.unblock():
        wrapper = _wrapper(path)
        with wrapper.cursor() as cursor:
            cursor.execute("CREATE TABLE t (n INTEGER)")
        wrapper.close()
        yield path
        pool.drain(str(path))


def test_a_closed_connection_is_reused_by_the_next_connect(db_file):
    first = _wrapper(db_file)
    raw = _raw_id(first)
    first.close()
    assert pool.idle_count(str(db_file)) == 1

    second = _wrapper(db_file)
    assert _raw_id(second) == raw
    assert pool.idle_count(str(db_file)) == 0
    with second.cursor() as cursor:  # as good as a new one: foreign keys on, autocommit
        assert cursor.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        cursor.execute("INSERT INTO t VALUES (1)")
    assert sqlite3.connect(db_file).execute("SELECT count(*) FROM t").fetchone()[0] == 1  # committed
    second.close()


def _begin(wrapper: DatabaseWrapper) -> None:
    """Open a write transaction the way `transaction.atomic` does on SQLite."""
    wrapper.ensure_connection()
    wrapper.in_atomic_block = True
    wrapper._start_transaction_under_autocommit()


def test_a_connection_closed_inside_a_transaction_is_never_pooled(db_file):
    wrapper = _wrapper(db_file)
    _begin(wrapper)
    with wrapper.cursor() as cursor:
        cursor.execute("INSERT INTO t VALUES (7)")
    wrapper.close()  # closed mid-transaction: Django still references it
    assert pool.idle_count(str(db_file)) == 0
    assert sqlite3.connect(db_file).execute("SELECT count(*) FROM t").fetchone()[0] == 0  # nothing kept
    assert not write_lock(str(db_file)).locked()


def test_an_open_transaction_is_rolled_back_before_the_connection_is_pooled(db_file):
    wrapper = _wrapper(db_file)
    wrapper.ensure_connection()
    wrapper.connection.execute("BEGIN")
    wrapper.connection.execute("INSERT INTO t VALUES (3)")
    wrapper.close()
    assert pool.idle_count(str(db_file)) == 1
    other = _wrapper(db_file)
    with other.cursor() as cursor:
        assert cursor.execute("SELECT count(*) FROM t").fetchone()[0] == 0
        assert not other.connection.in_transaction
    other.close()


def test_a_replaced_file_is_never_read_through_an_old_connection(db_file):
    wrapper = _wrapper(db_file)
    old = _raw_id(wrapper)
    wrapper.close()
    for suffix in ("", "-wal", "-shm"):  # the org removed and created again at the same path
        if os.path.exists(f"{db_file}{suffix}"):
            os.unlink(f"{db_file}{suffix}")
    fresh = sqlite3.connect(db_file)
    fresh.execute("CREATE TABLE u (m INTEGER)")
    fresh.commit()
    fresh.close()

    again = _wrapper(db_file)
    assert _raw_id(again) != old
    with again.cursor() as cursor:
        tables = {row[0] for row in cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"u"}
    again.close()


def test_a_replaced_files_old_connection_is_leaked_never_closed_over_the_new_wal(db_file):
    # A restore swaps a new file in (issue 35). SQLite closing the last connection of a WAL file
    # checkpoints it and deletes `-wal` by name, which is the new file's by then; the old
    # connection is leaked instead (take(), drain(), exit), and the new file's WAL stays readable.
    wrapper = _wrapper(db_file)
    _raw_id(wrapper)
    wrapper.close()
    assert pool.idle_count(str(db_file)) == 1
    replacement = db_file.with_name("replacement.db")
    new = sqlite3.connect(replacement)
    new.execute("PRAGMA journal_mode=WAL")
    new.execute("PRAGMA wal_autocheckpoint=0")
    new.execute("CREATE TABLE kept (n INTEGER)")
    new.commit()
    for suffix in ("-wal", "-shm"):
        if os.path.exists(f"{db_file}{suffix}"):
            os.unlink(f"{db_file}{suffix}")
    os.replace(replacement, db_file)
    os.replace(f"{replacement}-wal", f"{db_file}-wal")
    os.replace(f"{replacement}-shm", f"{db_file}-shm")
    new.execute("INSERT INTO kept VALUES (1)")
    new.commit()  # only in the WAL (no checkpoint)
    assert pool.drain(str(db_file)) == 1  # the old connection: leaked, not closed
    assert os.path.exists(f"{db_file}-wal")
    reader = sqlite3.connect(db_file)  # a new process's view: the committed row is in the WAL by name
    assert reader.execute("SELECT count(*) FROM kept").fetchone()[0] == 1
    reader.close()
    new.close()


def test_the_pool_is_bounded_per_file(db_file, settings):
    settings.AGENTS_SQLITE_IDLE_PER_FILE = 2
    wrappers = [_wrapper(db_file) for _ in range(4)]
    for wrapper in wrappers:
        wrapper.ensure_connection()
    for wrapper in wrappers:
        wrapper.close()
    assert pool.idle_count(str(db_file)) == 2


def test_draining_a_file_closes_its_idle_connections(db_file):
    wrapper = _wrapper(db_file)
    wrapper.ensure_connection()
    raw = wrapper.connection
    wrapper.close()
    assert pool.drain(str(db_file)) == 1
    with pytest.raises(sqlite3.ProgrammingError):
        raw.execute("SELECT 1")


_FORK_SCENARIO = """
import os, sqlite3, sys
import django
django.setup()
from agents_site.db_backends.sqlite3.base import pool
from tests.agents_site.test_sqlite_engine import _wrapper
db_file = sys.argv[1]
wrapper, holder = _wrapper(db_file), _wrapper(db_file)
with wrapper.cursor() as cursor:
    cursor.execute("INSERT INTO t VALUES (1)")
holder.ensure_connection()  # one in use, as a request's would be
held = holder.connection
wrapper.close()  # and one idle in the pool (emptied before the fork)
assert pool.idle_count(db_file) == 1
pid = os.fork()
if pid == 0:  # the child
    try:
        holder.close()
        pool.drain()
        import gc

        gc.collect()
    finally:
        os._exit(0)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0
assert held.execute("SELECT count(*) FROM t").fetchone()[0] == 1  # the parent's connection still works
assert os.path.exists(db_file + "-wal") and os.path.exists(db_file + "-shm")
fresh = sqlite3.connect(db_file)
assert fresh.execute("SELECT count(*) FROM t").fetchone()[0] == 1
fresh.close()
holder.close()
print("ok")
"""


def test_a_forked_child_never_closes_the_parents_connections(db_file):
    """A child closing an inherited WAL connection can checkpoint and delete the -wal/-shm under
    the parent. The child here does what a forked worker does (closes every connection it holds,
    drains the pool) and exits; the parent's connections and files are untouched.

    The fork happens in a process of its own: forking this test worker would hand the child the
    connections other tests' threads hold on the worker's test databases, which no wrapper of
    this test controls (the scenario itself is the same)."""
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _FORK_SCENARIO, str(db_file)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-4000:]


def test_writers_of_one_process_queue_on_the_files_lock(db_file):
    """Eight threads writing one file wait for the writer before them on the file's lock (woken at
    its commit), not inside SQLite's busy handler (which sleeps 1 to 100 ms between tries)."""
    lock = write_lock(str(db_file))
    holder = _wrapper(db_file)
    _begin(holder)
    assert lock.locked()
    done = []

    def write():
        wrapper = _wrapper(db_file)
        _begin(wrapper)
        with wrapper.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (2)")
        wrapper.in_atomic_block = False
        wrapper.commit()
        wrapper.close()
        done.append(1)

    threads = [threading.Thread(target=write) for _ in range(8)]
    for thread in threads:
        thread.start()

    def waiting_on_the_lock() -> int:
        frames = sys._current_frames()
        return sum(1 for t in threads if t.ident in frames and frames[t.ident].f_code.co_name == "_start_transaction_under_autocommit")

    deadline = time.monotonic() + 30
    while waiting_on_the_lock() < 8 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert waiting_on_the_lock() == 8 and done == []
    holder.in_atomic_block = False
    holder.commit()
    for thread in threads:
        thread.join(30)
    assert len(done) == 8 and not lock.locked()
    assert sqlite3.connect(db_file).execute("SELECT count(*) FROM t").fetchone()[0] == 8
    holder.close()
