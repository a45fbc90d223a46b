"""The worker lease of a queued run: who executes it, and proof that it is still alive.

A worker takes the lease of a run (`RunTask.worker` = `host:pid`) with one conditional UPDATE
before executing it, so a task delivered twice is executed once; while the run executes, a
daemon thread renews `RunTask.heartbeat_at` every `AGENTS_RUN_LEASE_SECONDS / 4`. A lease
whose holder is gone — heartbeat older than `AGENTS_RUN_LEASE_SECONDS`, or a `host:pid` of
this host that no longer exists — may be taken over (a queued run) or ends the run "worker
lost" (a running one, `runs.recovery`). Org context required throughout.
"""

from __future__ import annotations

import contextvars
import logging
import os
import socket
import threading
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connections
from django.utils import timezone

from runs.models import RunTask

logger = logging.getLogger(__name__)


def worker_identity() -> str:
    """Return `host:pid` of this process (recorded on the runs it executes)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def process_gone(worker: str) -> bool:
    """Return True when `worker` (`host:pid`) is a process of this host that no longer exists.

    A process of another host is never judged here (its heartbeat decides); nor is a pid that
    a new process may since have taken (it looks alive; the heartbeat then decides).
    """
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _is_zombie(int(pid))


def _is_zombie(pid: int) -> bool:
    """Return True when `pid` is a zombie (killed, not yet reaped by its parent) on Linux."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def holder_gone(task: RunTask, now: datetime) -> bool:
    """Return True when `task`'s lease holder is dead by heartbeat age or by its process."""
    if not task.worker:
        return True
    lease = timedelta(seconds=settings.AGENTS_RUN_LEASE_SECONDS)
    if task.heartbeat_at is None or now - task.heartbeat_at > lease:
        return True
    return process_gone(task.worker)


def lease_take(*, run_id: str) -> bool:
    """Take the lease of run `run_id` for this process; return True when it is ours.

    Free lease → taken. Held by a live worker → False (that worker executes it). Held by a
    dead one → taken over with a conditional UPDATE on the old holder, so of two takers only
    one wins.
    """
    me, now = worker_identity(), timezone.now()
    if RunTask.objects.filter(run_id=run_id, worker="").update(worker=me, heartbeat_at=now):
        return True
    task = RunTask.objects.filter(run_id=run_id).first()
    if task is None:
        return False
    if task.worker == me:
        return True
    if not holder_gone(task, now):
        return False
    return bool(
        RunTask.objects.filter(run_id=run_id, worker=task.worker, heartbeat_at=task.heartbeat_at).update(worker=me, heartbeat_at=now)
    )


class _Heartbeat:
    """Renew a lease from a daemon thread until stopped."""

    def __init__(self, run_id: str, interval: float) -> None:
        self.run_id = run_id
        self.interval = interval
        self.stop = threading.Event()
        self.me = worker_identity()
        context = contextvars.copy_context()  # a new Thread does not inherit the org ContextVar
        self.thread = threading.Thread(target=context.run, args=(self._beat,), name=f"lease-{run_id}", daemon=True)

    def _beat(self) -> None:
        try:
            while not self.stop.wait(self.interval):
                try:
                    RunTask.objects.filter(run_id=self.run_id, worker=self.me).update(heartbeat_at=timezone.now())
                except Exception:  # a busy store skips one beat; the lease outlives a few
                    logger.warning("lease renewal of %s failed", self.run_id, exc_info=True)
        finally:
            connections.close_all()


@contextmanager
def lease_kept(run_id: str):
    """Renew this process's lease of run `run_id` while the block runs."""
    beat = _Heartbeat(run_id, max(0.2, settings.AGENTS_RUN_LEASE_SECONDS / 4))
    beat.thread.start()
    try:
        yield
    finally:
        beat.stop.set()
        beat.thread.join(timeout=5)
