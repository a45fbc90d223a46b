"""The opt-in `shell` tool of a machine: `/bin/sh -c` confined (lexically) to one directory.

It exists only when the runner was started with `--allow-shell DIR`. A command runs in DIR with
a scrubbed environment (PATH, LANG, HOME=DIR, TMPDIR inside DIR: none of the runner's keys), a
30 s limit and 64 KiB of output (the whole process group is killed at either, and when the run
is stopped), and is refused when it names a path outside DIR (an absolute path elsewhere, `..`,
`~`). That boundary is lexical: for a hard one, run the runner as a dedicated user or in a
container.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from toolkit.invoke import Tool, ToolError
from toolkit.sandbox.process import run_process

SHELL_OUTPUT_BYTES = 64 * 1024


class Shell:
    """The `shell` tool bound to working directory `root` (see the module docstring)."""

    def __init__(self, root: Path, *, timeout: float = 30.0) -> None:
        self.root = Path(root).resolve()
        self.timeout = timeout

    def _inside(self, token: str) -> bool:
        if token.startswith("~"):
            return False
        parts = Path(token).parts
        if ".." in parts:
            return False
        if token.startswith("/"):
            resolved = Path(token).resolve()
            return resolved == self.root or self.root in resolved.parents
        return True

    def check(self, command: str) -> list[str]:
        """Return the command's tokens; raise `ToolError` if it names a path outside the root."""
        try:
            lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError as exc:
            raise ToolError(f"the command does not parse: {exc}") from exc
        for token in tokens:
            for piece in token.replace("=", " ").replace(":", " ").split():
                if not self._inside(piece):
                    raise ToolError(f"the shell is confined to {self.root}; {piece!r} is outside it")
        return tokens

    def environment(self) -> dict:
        """Return the scrubbed environment a command runs with (no keys of the runner)."""
        tmp = self.root / ".tmp"
        tmp.mkdir(exist_ok=True)
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": os.environ.get("LANG", "C.UTF-8"), "HOME": str(self.root), "TMPDIR": str(tmp)}

    async def __call__(self, arguments: dict) -> str:
        """Run `arguments["command"]`; return `exit <code>` then its output. Raises `ToolError` when refused or killed."""
        command = str(arguments.get("command") or "").strip()
        if not command:
            raise ToolError("a command is required")
        self.check(command)
        result = await run_process(["/bin/sh", "-c", command], env=self.environment(), cwd=self.root,
                                   timeout_seconds=self.timeout, output_bytes=SHELL_OUTPUT_BYTES)
        if result.timed_out:
            raise ToolError(f"the command ran longer than {self.timeout:g} s and was killed")
        code = "killed" if result.exit_code is None else result.exit_code
        tail = "\n[output limit reached: the command was stopped]" if result.truncated else ""
        return f"exit {code}\n{result.output}{tail}"

    def tool(self) -> Tool:
        """Return the `shell` tool definition bound to this root."""
        return Tool(
            name="shell",
            description=f"Run a shell command in the working directory {self.root} (nothing outside it) and return its exit code and output.",
            parameters={"type": "object", "properties": {"command": {"type": "string", "description": "e.g. ls -la"}}, "required": ["command"]},
            run=self,
        )
