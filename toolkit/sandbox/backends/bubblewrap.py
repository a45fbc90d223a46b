"""The bubblewrap sandbox (Debian's `bubblewrap`, the `bwrap` binary).

Each command runs as `prlimit … bwrap … /bin/sh -c <command>` with:

- every namespace unshared (`--unshare-all`: network, pid, ipc, uts, cgroup, user), so there is
  no network at all — not even loopback to this server;
- a read-only `/usr` (plus the merged-usr links `/bin`, `/lib`…) and a handful of read-only
  `/etc` files the dynamic linker and tools need — nothing else of the host: no
  `AGENTS_DATA_DIR`, no home, no org databases, no server sources;
- the working copy bound read-write at `/workspace` (the only writable path), a fresh tmpfs
  `/tmp`, a private `/proc` and minimal `/dev`;
- uid/gid 1000 inside a user namespace with every capability dropped; `--new-session` (no
  terminal injection) and `--die-with-parent`;
- a cleared environment: PATH, HOME=/tmp, TMPDIR=/tmp, LANG, PYTHONDONTWRITEBYTECODE=1 — none of the server's variables;
- rlimits set by `prlimit` on the whole tree: CPU seconds, address space, file size, and a
  wall-clock timeout after which the process group is killed; output beyond the limit stops
  the command.

A stop (the caller's task cancelled, `arun`) SIGKILLs the outer `bwrap`'s process group; its
sandboxed child dies with it (`--die-with-parent`), and with the pid namespace's first process
the kernel kills every process the command started — nothing of the command keeps running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path

from toolkit.sandbox.backends.base import Invocation, Limits, SandboxBackend, prlimit_argv
from toolkit.wire import MachineSandbox

SANDBOX_ROOT = "/workspace"
_ETC_FILES = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
    "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/mime.types", "/etc/ssl/certs",
)
_MERGED_USR = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "TERM": "dumb",
        "PYTHONDONTWRITEBYTECODE": "1"}  # no __pycache__ by-products in the working copy (issue 30 item 5)
_CHUNK = 8192


class BubblewrapSandbox(SandboxBackend):
    """Run commands under bubblewrap; unavailable when `bwrap` is missing or cannot unshare."""

    name = MachineSandbox.BUBBLEWRAP
    _probe: tuple[bool, str] | None = None
    _probe_lock = threading.Lock()

    def __init__(self, *, bwrap: str | None = None, prlimit: str | None = None) -> None:
        self.bwrap = bwrap or shutil.which("bwrap") or ""
        self.prlimit = prlimit or shutil.which("prlimit") or ""

    # -- availability ---------------------------------------------------------------------
    def _check(self) -> tuple[bool, str]:
        if not self.bwrap:
            return False, "bubblewrap (bwrap) is not installed on this host"
        if not self.prlimit:
            return False, "prlimit (util-linux) is not installed on this host"
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
        argv = prlimit_argv(self.prlimit, limits) if limits is not None else []
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

    def invocation(self, command: str, *, workdir: Path, limits: Limits) -> Invocation:
        """Return the confined start of `command`: `command_line`, an empty environment."""
        return Invocation(argv=self.command_line(command, workdir=workdir, limits=limits), env={})
