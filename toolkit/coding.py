"""The coding tools the model calls: `list_files`, `read_file`, `write_file`, `edit_file`,
`search`, `run`, `finish` (issue 14 item 3) — one implementation for the server's coding engine
and a machine's routed coding runs.

Every path is relative to the working copy. A path that is absolute, holds a `..` or `.git`
component, or a NUL is refused, and no tool ever follows a symbolic link: each directory on
the way is opened with `O_NOFOLLOW | O_DIRECTORY` relative to its parent's descriptor and the
file itself with `O_NOFOLLOW`, so a link planted in the repository (or by a command) cannot
lead a read or a write out of the working copy. A write whose text carries a masked
credential placeholder (`[redacted:…]`) is refused, so masking never corrupts a repository.
Failures come back to the model as `error: <why>` — a tool never crashes the run.

`ToolBox.call` is blocking; `await ToolBox.acall` runs `run` with the sandbox's async entry
point, so cancelling the awaiting task kills the command's process tree and raises
`toolkit.sandbox.CommandCancelled` (its `result` holds the output so far).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.invoke import ToolError
from toolkit.sandbox.backends.base import Limits, SandboxBackend

READ_LIMIT_BYTES = 32 * 1024
WRITE_LIMIT_BYTES = 1024 * 1024
LIST_LIMIT = 1000
SEARCH_LIMIT = 200
SEARCH_FILE_BYTES = 1024 * 1024
PLACEHOLDER = re.compile(r"\[redacted:[^\]\n]*\]")
FINISH = "finish"
WRITING_TOOLS = frozenset({"write_file", "edit_file", "run"})


@dataclass
class ToolBox:
    """The tools of one run over `root` (the working copy), running commands in `sandbox`."""

    root: Path
    sandbox: SandboxBackend | None
    limits: Limits
    seconds_left: Callable[[], float] = lambda: 3600.0
    handlers: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.handlers = {
            "list_files": self.list_files, "read_file": self.read_file, "write_file": self.write_file,
            "edit_file": self.edit_file, "search": self.search, "run": self.run,
        }

    # -- dispatch ----------------------------------------------------------------------------
    def _resolve(self, name: str, raw_arguments: str) -> tuple[Callable[[dict], str], dict]:
        handler = self.handlers.get(name)
        if handler is None:
            raise ToolError(f"unknown tool {name!r}; the tools are {', '.join(sorted([*self.handlers, FINISH]))}")
        try:
            arguments = json.loads(raw_arguments or "{}")
        except json.JSONDecodeError:
            raise ToolError("the arguments are not valid JSON") from None
        if not isinstance(arguments, dict):
            raise ToolError("the arguments must be a JSON object")
        return handler, arguments

    def call(self, name: str, raw_arguments: str) -> tuple[str, bool]:
        """Run tool `name` on its JSON arguments; return `(result text, failed)`. Blocking."""
        try:
            handler, arguments = self._resolve(name, raw_arguments)
            return handler(arguments), False
        except ToolError as exc:
            return f"error: {exc}", True

    async def acall(self, name: str, raw_arguments: str) -> tuple[str, bool]:
        """Run tool `name` like `call`, awaiting a command in the sandbox (file tools run on a thread).

        Cancelling the awaiting task during `run` kills the command's process tree and raises
        `CommandCancelled` with the output so far.
        """
        try:
            handler, arguments = self._resolve(name, raw_arguments)
            if handler == self.run:
                return await self.arun(arguments), False
            return await asyncio.to_thread(handler, arguments), False
        except ToolError as exc:
            return f"error: {exc}", True

    # -- paths -------------------------------------------------------------------------------
    def _parts(self, value: object, *, allow_root: bool = False) -> list[str]:
        if value is None and allow_root:
            return []
        if not isinstance(value, str):
            raise ToolError("path must be a string relative to the working copy")
        if "\x00" in value:
            raise ToolError("path holds a NUL character")
        if value.startswith("/") or value.startswith("~") or re.match(r"^[A-Za-z]:[\\/]", value):
            raise ToolError(f"{value!r} is absolute; give a path relative to the working copy")
        parts = [p for p in value.replace("\\", "/").split("/") if p not in ("", ".")]
        if any(p == ".." for p in parts):
            raise ToolError(f"{value!r} leaves the working copy ('..' is not allowed)")
        if any(p == ".git" for p in parts):
            raise ToolError(f"{value!r} is inside .git, which the tools do not touch")
        if not parts and not allow_root:
            raise ToolError("path names no file")
        return parts

    def _open_parent(self, parts: list[str], *, create: bool) -> int:
        """Return an fd of the directory holding `parts[-1]`, walked without following any link."""
        fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                try:
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise ToolError(f"no such directory: {part}") from None
                    os.mkdir(part, 0o755, dir_fd=fd)
                    child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise ToolError(f"{part!r} is a symbolic link or not a directory; the tools never follow links") from None
                    raise ToolError(f"cannot open {part!r}: {exc.strerror}") from None
                os.close(fd)
                fd = child
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _open_file(self, parts: list[str], flags: int, *, verb: str, create: bool) -> int:
        """Return an fd of the regular file `parts` opened with `flags`, never through a link."""
        display = "/".join(parts)
        parent = self._open_parent(parts, create=create)
        try:
            fd = os.open(parts[-1], flags | os.O_NOFOLLOW, 0o644, dir_fd=parent)
        except FileNotFoundError:
            raise ToolError(f"no such file: {display}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise ToolError(f"{display} is a symbolic link; the tools never follow links") from None
            raise ToolError(f"cannot {verb} {display}: {exc.strerror}") from None
        finally:
            os.close(parent)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise ToolError(f"{display} is not a regular file")
        return fd

    def _read_bytes(self, path: object, *, limit: int | None = None) -> tuple[str, bytes]:
        parts = self._parts(path)
        display = "/".join(parts)
        fd = self._open_file(parts, os.O_RDONLY | os.O_NONBLOCK, verb="read", create=False)
        try:
            with os.fdopen(fd, "rb", closefd=False) as handle:
                data = handle.read(limit + 1 if limit else -1)
        finally:
            os.close(fd)
        return display, data

    def _write_bytes(self, parts: list[str], data: bytes) -> None:
        display = "/".join(parts)
        if len(data) > WRITE_LIMIT_BYTES:
            raise ToolError(f"{display}: at most {WRITE_LIMIT_BYTES // 1024} KiB per file")
        fd = self._open_file(parts, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, verb="write", create=True)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    @staticmethod
    def _refuse_placeholder(text: str, display: str) -> None:
        if PLACEHOLDER.search(text):
            raise ToolError(
                f"refused: the text for {display} contains a masked credential placeholder ([redacted:…]); "
                "it stands for a value you were not shown. Keep the file's original text there (use edit_file on other lines) "
                "or reference the secret by name (an environment variable)."
            )

    # -- the tools ---------------------------------------------------------------------------
    def list_files(self, arguments: dict) -> str:
        """List the files under `path` (default the whole working copy), one relative path a line."""
        parts = self._parts(arguments.get("path"), allow_root=True)
        fd = self._open_parent([*parts, "x"], create=False) if parts else os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        lines: list[str] = []
        try:
            prefix = "/".join(parts)
            for dirpath, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                dirnames[:] = sorted(d for d in dirnames if d != ".git")
                for name in sorted(filenames):
                    rel = os.path.normpath(os.path.join(prefix, dirpath, name))
                    is_link = stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode)
                    lines.append(rel + (" (symbolic link)" if is_link else ""))
                    if len(lines) >= LIST_LIMIT:
                        lines.append(f"… listing stopped at {LIST_LIMIT} files")
                        return "\n".join(lines)
        finally:
            os.close(fd)
        return "\n".join(lines) if lines else "(no files)"

    def read_file(self, arguments: dict) -> str:
        """Return the text of `path` (at most 32 KiB; say so when cut)."""
        display, data = self._read_bytes(arguments.get("path"), limit=READ_LIMIT_BYTES)
        text = data[:READ_LIMIT_BYTES].decode("utf-8", errors="replace")
        if len(data) > READ_LIMIT_BYTES:
            text += f"\n…[{display} is longer than {READ_LIMIT_BYTES // 1024} KiB; the rest is not shown]"
        return text

    def write_file(self, arguments: dict) -> str:
        """Create or replace `path` with `content` (directories are made as needed)."""
        parts = self._parts(arguments.get("path"))
        content = arguments.get("content")
        if not isinstance(content, str):
            raise ToolError("content must be a string")
        display = "/".join(parts)
        self._refuse_placeholder(content, display)
        self._write_bytes(parts, content.encode())
        return f"wrote {display} ({len(content.encode())} bytes)"

    def edit_file(self, arguments: dict) -> str:
        """Replace the exact text `search` by `replace` in `path` (once; `all: true` for every match)."""
        search, replace = arguments.get("search"), arguments.get("replace")
        if not isinstance(search, str) or not search:
            raise ToolError("search must be the exact, non-empty text to replace")
        if not isinstance(replace, str):
            raise ToolError("replace must be a string")
        display, data = self._read_bytes(arguments.get("path"), limit=WRITE_LIMIT_BYTES)
        if len(data) > WRITE_LIMIT_BYTES:
            raise ToolError(f"{display} is too large to edit")
        text = data.decode("utf-8", errors="surrogateescape")
        count = text.count(search)
        if count == 0:
            raise ToolError(f"the search text was not found in {display}; read the file and give its exact text")
        if count > 1 and not arguments.get("all"):
            raise ToolError(f"the search text occurs {count} times in {display}; give more context or set all: true")
        self._refuse_placeholder(replace, display)
        new = text.replace(search, replace) if arguments.get("all") else text.replace(search, replace, 1)
        self._write_bytes(self._parts(display), new.encode("utf-8", errors="surrogateescape"))
        return f"edited {display} ({count if arguments.get('all') else 1} replacement{'s' if count > 1 and arguments.get('all') else ''})"

    def search(self, arguments: dict) -> str:
        """Return `path:line: text` for each line holding the literal `query` (≤ 200 matches)."""
        query = arguments.get("query", arguments.get("pattern"))
        if not isinstance(query, str) or not query:
            raise ToolError("query must be the non-empty text to look for")
        parts = self._parts(arguments.get("path"), allow_root=True)
        fd = self._open_parent([*parts, "x"], create=False) if parts else os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        matches: list[str] = []
        try:
            prefix = "/".join(parts)
            for dirpath, dirnames, filenames, dirfd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
                dirnames[:] = sorted(d for d in dirnames if d != ".git")
                for name in sorted(filenames):
                    try:
                        file_fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dirfd)
                    except OSError:
                        continue  # a link or unreadable: skipped, never followed
                    try:
                        if not stat.S_ISREG(os.fstat(file_fd).st_mode):
                            continue
                        with os.fdopen(file_fd, "rb", closefd=False) as handle:
                            data = handle.read(SEARCH_FILE_BYTES)
                    finally:
                        os.close(file_fd)
                    if b"\x00" in data[:8192]:
                        continue  # binary
                    rel = os.path.normpath(os.path.join(prefix, dirpath, name))
                    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                        if query in line:
                            matches.append(f"{rel}:{number}: {line[:300]}")
                            if len(matches) >= SEARCH_LIMIT:
                                matches.append(f"… stopped at {SEARCH_LIMIT} matches")
                                return "\n".join(matches)
        finally:
            os.close(fd)
        return "\n".join(matches) if matches else f"no line holds {query!r}"

    def _command(self, arguments: dict) -> tuple[str, Limits]:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty shell command")
        if self.sandbox is None:
            raise ToolError("commands cannot run here: no sandbox is available")
        if not self.sandbox.available():
            raise ToolError(f"commands cannot run here: {self.sandbox.unavailable_reason() or 'no sandbox is available'}")
        timeout = arguments.get("timeoutSeconds", arguments.get("timeout"))
        wall = self.limits.timeout_seconds
        if isinstance(timeout, (int, float)) and timeout > 0:
            wall = min(wall, float(timeout))
        wall = max(min(wall, self.seconds_left()), 0.1)
        limits = Limits(timeout_seconds=wall, cpu_seconds=self.limits.cpu_seconds, memory_mb=self.limits.memory_mb,
                        output_bytes=self.limits.output_bytes, file_mb=self.limits.file_mb)
        return command, limits

    def run(self, arguments: dict) -> str:
        """Run `command` with `/bin/sh -c` in the sandbox (working copy at /workspace); return output and exit code."""
        command, limits = self._command(arguments)
        return self.sandbox.run(command, workdir=self.root, limits=limits).for_model()

    async def arun(self, arguments: dict) -> str:
        """Async `run`: cancelling the awaiting task kills the command (`CommandCancelled`)."""
        command, limits = self._command(arguments)
        return (await self.sandbox.arun(command, workdir=self.root, limits=limits)).for_model()


def _function(name: str, description: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {"name": name, "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required}}}


def tool_definitions() -> list[dict]:
    """Return the OpenAI `tools` entries of the seven coding tools."""
    path = {"type": "string", "description": "a path relative to the repository root"}
    return [
        _function("list_files", "List the repository's files (relative paths).", {"path": {**path, "description": "a directory (default: the root)"}}, []),
        _function("read_file", "Read a text file of the repository.", {"path": path}, ["path"]),
        _function("write_file", "Create or replace a file with the given content.", {"path": path, "content": {"type": "string"}}, ["path", "content"]),
        _function("edit_file", "Replace exact text in a file (search must match exactly; all=true replaces every match).",
                  {"path": path, "search": {"type": "string"}, "replace": {"type": "string"}, "all": {"type": "boolean"}}, ["path", "search", "replace"]),
        _function("search", "Find the lines holding a literal text across the repository.", {"query": {"type": "string"}, "path": path}, ["query"]),
        _function("run", "Run a shell command in a sandbox at the repository root (no network; only the repository is writable).",
                  {"command": {"type": "string"}, "timeoutSeconds": {"type": "number"}}, ["command"]),
        _function(FINISH, "Finish the task: a summary of what changed (its first line becomes the last commit's subject).",
                  {"summary": {"type": "string"}}, ["summary"]),
    ]
