"""The bubblewrap sandbox on a machine: the same confinement as the server's (`coding/sandbox/`).

A copy of the server's backend, because the runner imports nothing from the server (it is
deployed alone on a machine). Keep the two in step.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Limits:
    """The limits of one command: wall time and CPU time (s), address space (MiB), output (bytes)."""

    timeout_seconds: float = 120.0
    cpu_seconds: int = 120
    memory_mb: int = 1024
    output_bytes: int = 64 * 1024
    file_mb: int = 200


@dataclass
class Result:
    """What a command did: its exit code (None when killed), merged stdout+stderr, and why it stopped.

    `timed_out` — killed at the wall-clock limit; `truncated` — the output limit was reached
    and the command was stopped.
    """

    exit_code: int | None
    output: str
    timed_out: bool = False
    truncated: bool = False

    def for_model(self) -> str:
        """Return the result as the model reads it: output, then one line saying how it ended."""
        tail = []
        if self.truncated:
            tail.append("[output limit reached: the command was stopped]")
        if self.timed_out:
            tail.append("[time limit reached: the command was killed]")
        elif self.exit_code is not None:
            tail.append(f"[exit code {self.exit_code}]")
        else:
            tail.append("[the command was killed]")
        return (self.output.rstrip("\n") + "\n" if self.output else "") + "\n".join(tail)


class SandboxBackend:
    """One way of confining a command. Subclasses implement `available` and `run`."""

    name = "base"

    def available(self) -> bool:
        """Return True when this host can run commands with every confinement of the contract."""
        raise NotImplementedError

    def unavailable_reason(self) -> str:
        """Return one sentence saying why `available()` is False ("" when it is True)."""
        return ""

    def run(self, command: str, *, workdir: Path, limits: Limits) -> Result:
        """Run `command` (a `/bin/sh -c` string) with `workdir` as the only writable path; return its `Result`."""
        raise NotImplementedError
SANDBOX_ROOT = "/workspace"
_ETC_FILES = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
    "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/mime.types", "/etc/ssl/certs",
)
_MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "TERM": "dumb"}
_CHUNK = 8192


class BubblewrapSandbox(SandboxBackend):
    """Run commands under bubblewrap; unavailable when `bwrap` is missing or cannot unshare."""

    name = "bubblewrap"
    _probe: tuple[bool, str] | None = None
    _probe_lock = threading.Lock()

    def __init__(self, *, bwrap: str | None = None, prlimit: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap") or ""
        self.prlimit = prlimit or shutil.which("prlimit") or ""

    # -- availability ---------------------------------------------------------------------
    def _check(self) -> tuple[bool, str]:
        if not self.bwrap:
            return False, "bubblewrap (bwrap) is not installed on this server"
        if not self.prlimit:
            return False, "prlimit (util-linux) is not installed on this server"
        try:
            probe = subprocess.run(
                [*self._argv(Path("/tmp"), probe=True), "/bin/true"], capture_output=True, timeout=10, env={}
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return False, f"bubblewrap cannot start: {exc}"
        if probe.returncode != 0:
            return False, "bubblewrap cannot create its namespaces here: " + probe.stderr.decode(errors="replace").strip()[:300]
        return True, ""

    def _state(self) -> tuple[bool, str]:
        cls = type(self)
        with cls._probe_lock:
            if cls._probe is None or not cls._probe[0]:
                cls._probe = self._check()
            return cls._probe

    def available(self) -> bool:
        """Return True when `bwrap` runs a probe command with all namespaces unshared."""
        return self._state()[0]

    def unavailable_reason(self) -> str:
        """Return why the sandbox cannot be used ("" when it can)."""
        return self._state()[1]

    # -- the command line -------------------------------------------------------------------
    def _argv(self, workdir: Path, *, probe: bool = False, limits: Limits | None = None) -> list[str]:
        argv = []
        if limits is not None:
            argv += [
                self.prlimit,
                f"--cpu={max(int(limits.cpu_seconds), 1)}",
                f"--as={max(int(limits.memory_mb), 64) * 1024 * 1024}",
                f"--fsize={max(int(limits.file_mb), 1) * 1024 * 1024}",
                "--core=0",
                "--",
            ]
        argv += [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
                 "--uid", "1000", "--gid", "1000", "--ro-bind", "/usr", "/usr"]
        for path in _MERGED_USR:
            if os.path.islink(path):
                argv += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                argv += ["--ro-bind", path, path]
        for path in _ETC_FILES:
            if os.path.exists(path):
                argv += ["--ro-bind", path, path]
        argv += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        if not probe:
            argv += ["--bind", str(workdir), SANDBOX_ROOT, "--chdir", SANDBOX_ROOT]
        argv += ["--clearenv"]
        for key, value in _ENV.items():
            argv += ["--setenv", key, value]
        return argv + ["--"]

    def command_line(self, command: str, *, workdir: Path, limits: Limits) -> list[str]:
        """Return the full argv that runs `command` confined to `workdir` (for tests and logs)."""
        return [*self._argv(workdir, limits=limits), "/bin/sh", "-c", command]

    # -- running ------------------------------------------------------------------------------
    def run(self, command: str, *, workdir: Path, limits: Limits) -> Result:
        """Run `command` in the sandbox; return its `Result` (never raises for the command's failure).

        Raises `RuntimeError` when the sandbox is unavailable (callers check `available()` first).
        """
        if not self.available():
            raise RuntimeError(self.unavailable_reason())
        argv = self.command_line(command, workdir=Path(workdir).resolve(), limits=limits)
        process = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env={}, start_new_session=True, close_fds=True,
        )
        chunks: list[bytes] = []
        size = 0
        truncated = False
        stop = threading.Event()

        def kill() -> None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

        def reader() -> None:
            nonlocal size, truncated
            stream = process.stdout
            while True:
                chunk = stream.read1(_CHUNK) if hasattr(stream, "read1") else stream.read(_CHUNK)
                if not chunk:
                    return
                if size < limits.output_bytes:
                    keep = chunk[: limits.output_bytes - size]
                    chunks.append(keep)
                    size += len(keep)
                if size >= limits.output_bytes and len(chunk) and not truncated:
                    truncated = True
                    stop.set()
                    kill()

        thread = threading.Thread(target=reader, name="sandbox-output", daemon=True)
        thread.start()
        deadline = time.monotonic() + max(limits.timeout_seconds, 0.1)
        timed_out = False
        while True:
            try:
                process.wait(timeout=max(min(deadline - time.monotonic(), 0.5), 0.01))
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    timed_out = True
                    kill()
                    process.wait()
                    break
        kill()  # anything the command left behind in its group
        thread.join(timeout=5)
        process.stdout.close()
        output = b"".join(chunks).decode("utf-8", errors="replace")
        exit_code = None if (timed_out or truncated or process.returncode < 0) else process.returncode
        return Result(exit_code=exit_code, output=output, timed_out=timed_out, truncated=truncated)


class UnconfinedCommands(SandboxBackend):
    """Commands with NO sandbox: only when the machine's owner started the runner with
    `--allow-unsandboxed-commands` on a machine without bubblewrap (the target's spec then shows
    `"sandbox": "none"`). `/bin/sh -c` in the working copy, a scrubbed environment (PATH, LANG,
    HOME and TMPDIR inside the working copy), CPU/memory/file-size limits when `prlimit`
    exists, the wall-clock timeout (the process group is killed) and the output limit. It can
    reach the network and the machine's files: the owner accepted that."""

    name = "none"

    def available(self) -> bool:
        return True

    def run(self, command: str, *, workdir: Path, limits: Limits) -> Result:
        workdir = Path(workdir).resolve()
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(workdir), "TMPDIR": str(workdir), "TERM": "dumb"}
        argv = ["/bin/sh", "-c", command]
        prlimit = shutil.which("prlimit")
        if prlimit:
            argv = [prlimit, f"--cpu={max(int(limits.cpu_seconds), 1)}", f"--as={max(int(limits.memory_mb), 64) * 1024 * 1024}",
                    f"--fsize={max(int(limits.file_mb), 1) * 1024 * 1024}", "--", *argv]
        process = subprocess.Popen(argv, cwd=workdir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   env=env, start_new_session=True, close_fds=True)
        try:
            output, _ = process.communicate(timeout=max(limits.timeout_seconds, 0.1))
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            timed_out = True
        truncated = len(output) > limits.output_bytes
        text = output[: limits.output_bytes].decode("utf-8", errors="replace")
        code = None if timed_out or process.returncode < 0 else process.returncode
        return Result(exit_code=code, output=text, timed_out=timed_out, truncated=truncated)


def machine_sandbox(*, allow_unsandboxed: bool) -> SandboxBackend | None:
    """Return bubblewrap when it works here; else the unconfined runner if the owner allowed it; else None."""
    bubblewrap = BubblewrapSandbox()
    if bubblewrap.available():
        return bubblewrap
    return UnconfinedCommands() if allow_unsandboxed else None
