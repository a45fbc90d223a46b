"""Fixtures of the runner tests: the daemon as a real subprocess against a real daphne."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.live import ROOT, LiveServer

START_SECONDS = 300.0  # a bound on a daphne start; a 2-core box shared by several suites took > 120 s


class RunnerProcess:
    """`python -m runner …` in a subprocess, its log in a file."""

    def __init__(self, *, server: str, api_key: str, key_dir: Path, log: Path, args: tuple[str, ...] = (), env: dict | None = None):
        self.command = [sys.executable, "-m", "runner", "--server", server, "--api-key", api_key, "--key-dir", str(key_dir),
                        "--heartbeat", "0.5", "--log-level", "DEBUG", *args]
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", **(env or {})}
        for name in ("INFERENCE_BASE_URL", "INFERENCE_API_KEY"):
            if env is None or name not in env:
                self.env.pop(name, None)
        if os.environ.get("AGENTS_COVERAGE_RUNNER"):  # `make coverage-runner`: measure this child too
            self.env["COVERAGE_PROCESS_START"] = os.environ["AGENTS_COVERAGE_RUNNER"]
        self.log_path = log
        self.proc: subprocess.Popen | None = None

    def start(self) -> RunnerProcess:
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT)
        return self

    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for(self, text: str, timeout: float = 120.0) -> None:
        """Wait until the log contains `text` (or fail with the log)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError(f"runner log never showed {text!r}:\n{self.log()[-3000:]}")

    def terminate(self, timeout: float = 20.0) -> int:
        """Send SIGTERM and return the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def runner_factory(tmp_path):
    """Return `start(server_url, api_key, *args, env=None) -> RunnerProcess`; all are killed at the end."""
    started: list[RunnerProcess] = []

    def start(server: str, api_key: str, *args: str, env: dict | None = None, key_dir: Path | None = None) -> RunnerProcess:
        runner = RunnerProcess(server=server, api_key=api_key, key_dir=key_dir or tmp_path / "keys", log=tmp_path / f"runner-{len(started)}.log",
                               args=args, env=env).start()
        started.append(runner)
        return runner

    yield start
    for runner in started:
        runner.kill()


@pytest.fixture(scope="module")
def daphne_server(django_db_setup, django_db_blocker):
    """One daphne for the module's tests, claims waiting 1 s."""
    server = LiveServer({"AGENTS_CLAIM_WAIT_SECONDS": "1"}).start(timeout=START_SECONDS)
    yield server
    server.stop()
