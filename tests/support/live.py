"""Real daphne processes for streaming and end-to-end tests.

`LiveServer(env).start()` runs `daphne server.asgi:application` on a free loopback port
with the test run's data directory and the pytest default database file, so rows the test
commits (use `transactional_db`) are what the server sees.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """Return a free TCP port on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _default_database_url(db: dict) -> str:
    """Return a URL of the test run's default database (the SQLite file, or the PostgreSQL test database)."""
    if "postgresql" in db["ENGINE"]:
        auth = db["USER"] + (f":{db['PASSWORD']}" if db.get("PASSWORD") else "")
        return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    return "sqlite:///" + str(db["NAME"])


def server_env(extra: dict | None = None) -> dict:
    """Return the environment a child server process of the tests runs with."""
    from django.conf import settings
    from django.db import connections

    env = dict(os.environ)
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "agents_site.settings",
            "AGENTS_DATA_DIR": str(settings.AGENTS_DATA_DIR),
            "DATABASE_URL": _default_database_url(connections["default"].settings_dict),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update({k: str(v) for k, v in (extra or {}).items()})
    return env


def _listens(pid: int, port: int) -> bool:
    """Return whether process `pid` holds the socket listening on 127.0.0.1:`port` (Linux /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(fields[9])
    try:
        held = {os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        return False
    return any(f"socket:[{inode}]" in held for inode in inodes)


class LiveServer:
    """One daphne process; `url` is its base address."""

    def __init__(self, env: dict | None = None) -> None:
        self.port = free_port()
        self.env = server_env(env)
        self.proc: subprocess.Popen | None = None
        self.log_path = Path(self.env["AGENTS_DATA_DIR"]) / f"daphne-{self.port}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> LiveServer:  # a loaded 2-core CI box takes > 30 s
        """Start daphne and return once it answers — and is this process's own daphne.

        `free_port()` only finds a port free *now*: another test process (the other xdist worker,
        a second `make test` on the machine) may bind it before daphne does. Then this daphne
        exits ("Address already in use") while the port answers — with the other process's
        server, its database and keys (requests came back "API key unknown"). So the answer only
        counts once this daphne holds the port's listening socket; a lost race starts again on a new port.
        """
        deadline = time.monotonic() + timeout
        for _ in range(5):
            if self._launch(deadline):
                return self
            self.port = free_port()
            self.log_path = Path(self.env["AGENTS_DATA_DIR"]) / f"daphne-{self.port}.log"
        raise RuntimeError("daphne lost the race for a free port five times")

    def _launch(self, deadline: float) -> bool:
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            # The Procfile's endpoint: the listen backlog of `make run` (AGENTS_LISTEN_BACKLOG).
            [sys.executable, "-m", "daphne", "-e",
             f"tcp:port={self.port}:interface=127.0.0.1:backlog={self.env.get('AGENTS_LISTEN_BACKLOG', '2048')}",
             "server.asgi:application"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                text = self.log_path.read_text()
                if "Address already in use" in text or "Couldn't listen" in text:
                    return False  # another process took the port first
                raise RuntimeError(f"daphne exited: {text[-2000:]}")
            try:
                # Any answer says the application is loaded (daphne imports it before it listens).
                # A cheap route with room to answer: the probe was the OpenAPI document (~200 KiB
                # built per request) with 1 s to answer; under load (≥ 4 on 2 cores) building it
                # took longer, each probe gave up, daphne killed the request and the next probe began
                # again, so a daphne that was up "did not start in time" (45 tests of one make test).
                httpx.get(self.url + "/favicon.ico", timeout=10.0)
                if _listens(self.proc.pid, self.port):
                    return True
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError("daphne did not start in time")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
