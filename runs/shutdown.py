"""A worker that is told to stop: no new run, a grace for the run in flight, then "worker stopped".

`manage.py qcluster` (agents_site's override of django-q2's command) answers SIGTERM/SIGINT by
signalling every worker process (SIGUSR1) before django-q2's own stop. A worker so told:

- takes no new run: a queued run it receives is handed back to the queue untouched
  (`worker_stopping()`, checked by `runs.background.run_execute_queued`);
- gives the run it is executing `AGENTS_SHUTDOWN_GRACE_SECONDS` (default 10) to finish; a run
  still executing then ends `error` "worker stopped" through the run lifecycle (unbilled, and
  never re-run: it may have called tools with side effects), and the worker process exits.

The cluster therefore exits within the grace plus a few seconds instead of waiting for every
run to end (up to `AGENTS_RUN_TIMEOUT_SECONDS`).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from contextlib import contextmanager

from django.conf import settings

from runs.lifecycle import Outcome, run_finish
from sessions.bus import flush_before_exit
from agents_site.vocabulary import RunStatus
from tenancy import stores

logger = logging.getLogger(__name__)

#: The error of a run its worker gave up when the cluster stopped (not billed, never re-run).
WORKER_STOPPED = "worker stopped"
#: The signal a stopping cluster sends its workers.
STOP_SIGNAL = signal.SIGUSR1

_stopping = threading.Event()
_lock = threading.Lock()
_executing: dict[str, str] = {}  # {"org", "run_id"} of the run this process executes now
_idle = threading.Event()
_idle.set()


def worker_stopping() -> bool:
    """Return True once this worker process was told to stop (it takes no new run)."""
    return _stopping.is_set()


@contextmanager
def executing(*, org: str, run_id: str):
    """Mark run `run_id` of `org` as the one this worker executes for the block."""
    with _lock:
        _executing.update(org=org, run_id=run_id)
        _idle.clear()
    try:
        yield
    finally:
        with _lock:
            _executing.clear()
            _idle.set()


def install_worker_handler() -> None:
    """Make this process (a django-q2 worker) answer `STOP_SIGNAL` by stopping gracefully."""
    signal.signal(STOP_SIGNAL, _on_stop)


def _on_stop(signum, frame) -> None:
    if _stopping.is_set():
        return
    _stopping.set()
    grace = float(getattr(settings, "AGENTS_SHUTDOWN_GRACE_SECONDS", 10))
    timer = threading.Timer(grace, _give_up)
    timer.daemon = True
    timer.start()


def _give_up() -> None:
    """At the end of the grace: end the run still executing "worker stopped", then exit."""
    with _lock:
        current = dict(_executing)
    if not current:
        return  # idle: the worker leaves on django-q2's own stop pill
    try:
        with stores.org_context(current["org"], create=False):
            ended = run_finish(run_id=current["run_id"], outcome=Outcome.failed(WORKER_STOPPED),
                               from_statuses=frozenset({RunStatus.RUNNING}))
        if ended is None:  # it finished on its own meanwhile: let it record and bill that
            _idle.wait(5)
        else:
            logger.warning("run %s of %s ended: %s", current["run_id"], current["org"], WORKER_STOPPED)
    except Exception:
        logger.exception("could not end run %s on shutdown", current.get("run_id"))
    flush_before_exit(1.0)  # `os._exit` runs no exit hook: the last frames go live first (1 s: inside qcluster's 3 s kill margin)
    os._exit(0)


def signal_workers(root_pid: int, signum: int = STOP_SIGNAL) -> list[int]:
    """Send `signum` to every descendant process of `root_pid` (Linux `/proc`); return their pids."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                ppid = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root_pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    for pid in found:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass
    return found
