"""Real `manage.py qcluster` processes for durable-execution tests.

`QCluster(env).start()` runs a django-q2 cluster in its own process group with the test run's
data directory and the pytest default database file (`tests.support.live.server_env`), so
the rows a test commits (use `transactional_db`) are what its workers see. `kill()` sends
SIGKILL to the whole group — the cluster, its workers, monitor and pusher — as a crash would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.live import ROOT, server_env


class QCluster:
    """One django-q2 cluster process group; `log_path` holds its output."""

    def __init__(self, env: dict | None = None, *, name: str = "qcluster") -> None:
        self.env = server_env({"AGENTS_LOG_LEVEL": "INFO", **(env or {})})
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(self.env["AGENTS_DATA_DIR"]) / f"{name}-{os.getpid()}-{time.monotonic_ns()}.log"

    def start(self) -> QCluster:
        """Start the cluster (returns at once; its workers spawn within a second or two)."""
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, so kill() reaches every worker
        )
        return self

    def log(self) -> str:
        """Return the cluster's output so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL the cluster and every process in its group; wait for the parent."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the cluster gracefully (SIGTERM to its parent, which stops its workers).

        Whatever is still alive after `timeout` seconds is killed.
        """
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # stragglers of the group, if any
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=10)


def wait_for(predicate, *, timeout: float, interval: float = 0.1, message: str = "condition"):
    """Poll `predicate()` until it returns a truthy value (returned) or raise after `timeout` s
    (`tests.support.waiting.wait_until` with the cluster tests' 0.1 s interval)."""
    from tests.support.waiting import wait_until

    return wait_until(predicate, timeout=timeout, interval=interval, what=message)
