"""Run the SDKs' example echo agents as real processes against a live daphne (tests only)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from agents_identity.keys import Credentials, KeyPairs, new_webhook_secret

ROOT = Path(__file__).resolve().parents[2]
TS = ROOT / "sdk" / "typescript"


def build_typescript_sdk() -> None:
    """Build sdk/typescript (npm ci against its lockfile when needed, then tsc), once at a time."""
    lock_path = Path(os.environ.get("TMPDIR", "/tmp")) / "agents-sdk-typescript-build.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = subprocess.run(["bash", str(ROOT / "scripts" / "test-sdk-typescript.sh")], env={**os.environ, "SDK_TS_BUILD_ONLY": "1"},
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]


def new_credentials(base_url: str, created: dict, *, webhook: bool, previous: KeyPairs | None = None) -> Credentials:
    """Fresh keys for agent `created` (the old X25519 key kept when `previous` is given)."""
    keys = KeyPairs()
    if previous is not None:
        keys.previous_x25519 = [previous.x25519, *previous.previous_x25519]
    return Credentials(base_url=base_url, agent_id=created["agent_id"], agent_token=created["agent_token"], keys=keys,
                       webhook_secret=new_webhook_secret() if webhook else None)


@dataclass
class EchoAgent:
    """One example echo agent process (`sdk` "python" or "typescript", `mode` "websocket" or "webhook")."""

    sdk: str
    mode: str
    credentials_path: Path
    log_path: Path
    port: int = 0
    proc: subprocess.Popen | None = None
    lines: list[str] = field(default_factory=list)

    def command(self, register: bool) -> list[str]:
        extra = ["--mode", self.mode, "--port", str(self.port)] + (["--register"] if register else [])
        if self.sdk == "python":
            return [sys.executable, "-m", "agents_identity.examples.echo", str(self.credentials_path), *extra]
        return ["node", str(TS / "dist" / "examples" / "echo-agent.js"), str(self.credentials_path), *extra]

    def start(self, *, register: bool = False, timeout: float = 60.0) -> EchoAgent:
        env = {**os.environ, "PYTHONPATH": str(ROOT / "sdk" / "python"), "PYTHONUNBUFFERED": "1"}
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(register), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
        ready = "listening for webhooks" if self.mode == "webhook" else "connected"
        self.wait_for(ready, timeout=timeout)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for(self, text: str, *, timeout: float = 30.0, count: int = 1) -> str:
        """Wait until `text` appears `count` times in the agent's output (a condition, not a sleep)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.log()
            if out.count(text) >= count:
                return out
            if self.proc is not None and self.proc.poll() is not None and out.count(text) < count:
                raise AssertionError(f"the {self.sdk} agent exited ({self.proc.returncode}) before saying {text!r}:\n{out[-3000:]}")
            time.sleep(0.05)
        raise AssertionError(f"the {self.sdk} agent never said {text!r}:\n{self.log()[-3000:]}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
