"""The sandbox contract: run one shell command confined to a working copy (issue 14 item 4).

A backend must give the command no network, the working copy as its only writable path
(plus a fresh, private /tmp), a read-only view of the system, a scrubbed environment (none of
the server's variables), CPU-time, memory and output limits, and a wall-clock timeout after
which the whole process tree is killed. A backend that cannot promise all of that reports
`available() == False`; coding runs then answer 503 `sandbox_unavailable`, never a fallback to
running unconfined.
"""

from __future__ import annotations

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
