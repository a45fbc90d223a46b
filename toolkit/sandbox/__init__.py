"""Sandboxes for the coding `run` tool, shared by the server and the runner.

`BubblewrapSandbox` is the only confining backend; `UnconfinedCommands` exists only for a
machine whose owner opted in; `Unavailable` stands for "no sandbox here" (the server answers
503, a machine refuses `run`). Settings are the caller's: the server picks a backend from
`AGENTS_CODING_SANDBOX` (`coding.sandbox`), the runner from its flags (`machine_sandbox`).
"""

from __future__ import annotations

from toolkit.sandbox.backends.base import Invocation, Limits, Result, SandboxBackend
from toolkit.sandbox.backends.bubblewrap import BubblewrapSandbox
from toolkit.sandbox.backends.unconfined import UnconfinedCommands
from toolkit.sandbox.process import CommandCancelled, run_blocking, run_process


class Unavailable(SandboxBackend):
    """No sandbox: `available()` is False and `unavailable_reason()` says why (given by the caller)."""

    name = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def available(self) -> bool:
        """Return False."""
        return False

    def unavailable_reason(self) -> str:
        """Return the reason given at construction."""
        return self.reason


def machine_sandbox(*, allow_unsandboxed: bool) -> SandboxBackend | None:
    """Return bubblewrap when it works here; else the unconfined runner if the owner allowed it; else None."""
    bubblewrap = BubblewrapSandbox()
    if bubblewrap.available():
        return bubblewrap
    return UnconfinedCommands() if allow_unsandboxed else None


__all__ = [
    "BubblewrapSandbox", "CommandCancelled", "Invocation", "Limits", "Result", "SandboxBackend", "Unavailable",
    "UnconfinedCommands", "machine_sandbox", "run_blocking", "run_process",
]
