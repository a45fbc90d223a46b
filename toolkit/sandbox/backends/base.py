"""The sandbox contract: run one shell command confined to a working copy (issue 14 item 4).

A backend must give the command no network, the working copy as its only writable path
(plus a fresh, private /tmp), a read-only view of the system, a scrubbed environment (none of
the host's variables), CPU-time, memory and output limits, and a wall-clock timeout after
which the whole process tree is killed. A backend that cannot promise all of that reports
`available() == False`; the server then answers 503 `sandbox_unavailable`, never a fallback to
running unconfined (only a machine's owner may opt into `UnconfinedCommands`).

Two entry points: `await backend.arun(...)` — cancelling the awaiting task kills the
command's whole process tree and raises `toolkit.sandbox.CommandCancelled` carrying the output
so far (issue 25) — and the blocking `backend.run(...)` for synchronous callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from toolkit.sandbox.process import Result, run_blocking, run_process  # Result lives with the process that makes it


@dataclass
class Limits:
    """The limits of one command: wall time and CPU time (s), address space (MiB), output (bytes), file size (MiB)."""

    timeout_seconds: float = 120.0
    cpu_seconds: int = 120
    memory_mb: int = 1024
    output_bytes: int = 64 * 1024
    file_mb: int = 200



@dataclass(frozen=True)
class Invocation:
    """How a backend starts one command: the argv, the whole environment, the working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None


class SandboxBackend:
    """One way of confining a command. Subclasses implement `available` and `invocation`."""

    name = "base"

    def available(self) -> bool:
        """Return True when this host can run commands with every confinement of the contract."""
        raise NotImplementedError

    def unavailable_reason(self) -> str:
        """Return one sentence saying why `available()` is False ("" when it is True)."""
        return ""

    def invocation(self, command: str, *, workdir: Path, limits: Limits) -> Invocation:
        """Return how `command` (a `/bin/sh -c` string) is started confined to `workdir`."""
        raise NotImplementedError

    async def arun(self, command: str, *, workdir: Path, limits: Limits) -> Result:
        """Run `command` with `workdir` as the only writable path; return its `Result`.

        Never raises for the command's own failure. Raises `RuntimeError` when the sandbox is
        unavailable (callers check `available()` first) and `CommandCancelled` when the
        awaiting task is cancelled (the process tree is gone by then).
        """
        if not self.available():
            raise RuntimeError(self.unavailable_reason())
        started = self.invocation(command, workdir=Path(workdir).resolve(), limits=limits)
        return await run_process(started.argv, env=started.env, cwd=started.cwd,
                                 timeout_seconds=limits.timeout_seconds, output_bytes=limits.output_bytes)

    def run(self, command: str, *, workdir: Path, limits: Limits) -> Result:
        """Blocking form of `arun` for synchronous callers (same result, same errors but cancellation)."""
        return run_blocking(lambda: self.arun(command, workdir=workdir, limits=limits))


def prlimit_argv(prlimit: str, limits: Limits) -> list[str]:
    """Return the `prlimit … --` prefix applying `limits` (CPU s, address space, file size, no core) to a tree."""
    return [
        prlimit,
        f"--cpu={max(int(limits.cpu_seconds), 1)}",
        f"--as={max(int(limits.memory_mb), 64) * 1024 * 1024}",
        f"--fsize={max(int(limits.file_mb), 1) * 1024 * 1024}",
        "--core=0",
        "--",
    ]
