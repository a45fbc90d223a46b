"""The per-org restore fence: while an org is restored, every process refuses to act for it.

SQLite mode (one host: the files are local). Two files in the org's directory:

* `restoring` — the flag. `manage.py restore_org` creates it; from then on every process's
  first frame acting for the org (`tenancy.stores`: a request, a task, a stream read) raises
  `StoreUnavailable(restoring)` (503 `store_unavailable`, `condition: restoring`).
* `fence.lock` — a shared `flock` each process holds while any of its frames acts for the org
  (taken when the first frame enters, dropped when the last leaves). The restore takes it
  exclusively after raising the flag, so it waits until every frame that entered before the
  flag has ended in every process: nothing answered 2xx is written to the old file after the
  new one is in place. Connections to the old file left idle in a pool are never reused (the
  SQLite engine's pool checks the file's inode); one a thread still has open is dropped on the
  thread's next entry (`tenancy.backends.sqlite.drop_stale_connection`).

PostgreSQL org mode (any number of hosts): the flag is the org's `running` row of
`tenancy.OrgRestore` in the default database, read at most once a second per process and org
(`PG_FLAG_TTL_SECONDS`); the restore itself is one transaction, so no drain is needed.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import time
from pathlib import Path

from django.conf import settings

from agents_site.errors import StoreUnavailable
from agents_site.vocabulary import RestoreStatus, StoreCondition
from tenancy.backends.sqlite import store_path
from tenancy.models import OrgRestore

FLAG_NAME = "restoring"
LOCK_NAME = "fence.lock"
#: Seconds a PostgreSQL-mode process trusts its last reading of an org's restore flag.
PG_FLAG_TTL_SECONDS = 1.0

_guard = threading.Lock()
# slug → [frames of this process acting for it, fd of its fence.lock (SQLite mode) or -1]
_held: dict[str, list[int]] = {}
# slug → (monotonic time read, restoring?) in PostgreSQL mode
_pg_flags: dict[str, tuple[float, bool]] = {}


def _forget_after_fork() -> None:
    # A forked child holds none of its parent's frames; the inherited fds share the parent's locks.
    global _guard, _held, _pg_flags
    _guard, _held, _pg_flags = threading.Lock(), {}, {}


os.register_at_fork(after_in_child=_forget_after_fork)


def org_dir(slug: str) -> Path:
    """Return the directory of (validated) org `slug`'s SQLite file."""
    return store_path(slug).parent


def flag_path(slug: str) -> Path:
    """Return the path of org `slug`'s restore flag (SQLite mode)."""
    return org_dir(slug) / FLAG_NAME


def _sqlite_mode() -> bool:
    return getattr(settings, "AGENTS_ORG_DATABASE", "sqlite") == "sqlite"


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _pg_restoring(slug: str) -> bool:
    now = time.monotonic()
    seen = _pg_flags.get(slug)
    if seen is not None and (now - seen[0] < PG_FLAG_TTL_SECONDS or _in_event_loop()):
        return seen[1]  # on the event loop no query may run: the request's thread read it just before
    if _in_event_loop():
        return False

    restoring = OrgRestore.objects.using("default").filter(slug=slug, status=RestoreStatus.RUNNING).exists()
    _pg_flags[slug] = (now, restoring)
    return restoring


def enter(slug: str) -> None:
    """Count one more frame of this process acting for org `slug`.

    Raises `StoreUnavailable(restoring)` (and counts nothing) while the org is being restored.
    """
    with _guard:
        entry = _held.get(slug)
        if entry is not None:
            entry[0] += 1
            return
        fd = -1
        if _sqlite_mode():
            directory = org_dir(slug)
            if (directory / FLAG_NAME).exists():
                raise StoreUnavailable(StoreCondition.RESTORING)
            if directory.is_dir():
                fd = os.open(directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    raise StoreUnavailable(StoreCondition.RESTORING) from None
        elif _pg_restoring(slug):
            raise StoreUnavailable(StoreCondition.RESTORING)
        _held[slug] = [1, fd]


def leave(slug: str) -> None:
    """Undo one `enter(slug)`; the last frame of this process releases the shared lock."""
    with _guard:
        entry = _held.get(slug)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] <= 0:
            del _held[slug]
            if entry[1] >= 0:
                os.close(entry[1])  # closing the only fd of the open file drops its flock


class Fenced:
    """The restore's side of the fence (SQLite mode): the flag up and every frame drained.

    `raise_flag()` creates the flag; `drain(timeout)` waits (polling the exclusive lock) until
    no process acts for the org, and raises `TimeoutError` naming the wait otherwise;
    `lower()` drops both. Use as a context manager: the flag always comes down.
    """

    def __init__(self, slug: str) -> None:
        self.slug = slug
        self.directory = org_dir(slug)
        self.fd = -1

    def raise_flag(self) -> None:
        """Create the flag: from now on no process starts acting for the org."""
        self.directory.mkdir(parents=True, exist_ok=True)
        flag = self.directory / FLAG_NAME
        flag.write_text(f"{os.getpid()} {time.time():.3f}\n")

    def drain(self, timeout: float) -> None:
        """Wait until every frame acting for the org in any process has ended (`TimeoutError` past `timeout` s)."""
        self.fd = os.open(self.directory / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        deadline = time.monotonic() + timeout
        delay = 0.005
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"work for the org was still in progress after {timeout:.0f} s (a run or a long-poll in flight); "
                                       "nothing was changed: retry, or stop that work first") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.1)

    def lower(self) -> None:
        """Drop the exclusive lock and the flag: the org is served again."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        (self.directory / FLAG_NAME).unlink(missing_ok=True)

    def __enter__(self) -> Fenced:
        return self

    def __exit__(self, *exc) -> None:
        self.lower()


def restoring(slug: str) -> bool:
    """Return True while org `slug` is being restored (its flag is up)."""
    if _sqlite_mode():
        return flag_path(slug).exists()
    return _pg_restoring(slug)


def check(slug: str) -> None:
    """Raise `StoreUnavailable(restoring)` while org `slug` is being restored (counts nothing).

    Called by the request's principal lookup, on a thread: in PostgreSQL mode that is where the
    flag is read from the default database (a frame entered on the event loop reuses it).
    """
    if restoring(slug):
        raise StoreUnavailable(StoreCondition.RESTORING)
