"""The machine's tools: the built-ins (`current_time`, `calculator`) and the opt-in `shell`.

A routed run names its agent's tools; the runner offers those it has and records the others
as not offered. Results follow the server's rules: errors come back to the model as
`"error: …"`, an empty result as `"(the tool ran and returned nothing)"`, and results are cut
at 16 KiB.

`shell` exists only when the daemon was started with `--allow-shell DIR`. It runs `/bin/sh -c`
in DIR with a scrubbed environment (PATH, LANG, HOME=DIR, TMPDIR inside DIR: none of the
runner's keys), a 30 s limit (the whole process group is killed) and refuses any command that
names a path outside DIR (an absolute path elsewhere, `..`, `~`). That boundary is lexical:
for a hard one, run the daemon as a dedicated user or in a container.
"""

from __future__ import annotations

import ast
import asyncio
import math
import operator
import os
import shlex
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

MAX_RESULT_BYTES = 16 * 1024
MAX_ARGUMENT_BYTES = 32 * 1024
TRUNCATED = "\n…[truncated: the result was longer than this agent may read]"
EMPTY = "(the tool ran and returned nothing)"
TOO_LARGE = "error: the arguments for this call were too large to run"
SHELL_OUTPUT_BYTES = 64 * 1024


class ToolError(Exception):
    """The tool refused or failed; the model reads `error: <message>`."""


@dataclass
class Tool:
    """One tool the model may call: its schema and its async implementation."""

    name: str
    description: str
    parameters: dict
    run: Callable[[dict], Awaitable[str]]

    def definition(self) -> dict:
        """Return the OpenAI `tools` entry of this tool."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


# --- current_time ---------------------------------------------------------------------------


async def _current_time(arguments: dict) -> str:
    name = str(arguments.get("timezone") or "UTC").strip() or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(f"{name!r} is not an IANA time zone") from exc
    return datetime.now(zone).replace(microsecond=0).isoformat() + f" ({name})"


# --- calculator (AST whitelist, never eval) ---------------------------------------------------

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {"abs": abs, "round": round, "min": min, "max": max, "sqrt": math.sqrt, "log": math.log, "log10": math.log10,
              "exp": math.exp, "sin": math.sin, "cos": math.cos, "tan": math.tan, "floor": math.floor, "ceil": math.ceil}
_CONSTANTS = {"pi": math.pi, "e": math.e}


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ToolError("only numbers are allowed")
    if isinstance(value, int) and abs(value) > 10**300:
        raise ToolError("the result is too large")
    return value


def _evaluate(node: ast.AST):
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        return _number(node.value)
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _number(_UNARY[type(node.op)](_evaluate(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 10_000 or (abs(left) > 1 and abs(right) * math.log10(abs(left)) > 300)):
            raise ToolError("the exponent is too large")
        return _number(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS and not node.keywords and len(node.args) <= 8:
        return _number(_FUNCTIONS[node.func.id](*[_evaluate(arg) for arg in node.args]))
    raise ToolError(f"'{type(node).__name__}' is not allowed in an arithmetic expression")


def calculate(expression: str) -> str:
    """Return the value of arithmetic `expression` as text (`"2 + 3 * 4"` → `"14"`)."""
    expression = (expression or "").strip()
    if not expression or len(expression) > 1000:
        raise ToolError("an expression of 1 to 1000 characters is required")
    try:
        value = _evaluate(ast.parse(expression, mode="eval"))
    except SyntaxError as exc:
        raise ToolError(f"not an arithmetic expression: {exc.msg}") from exc
    except ZeroDivisionError as exc:
        raise ToolError("division by zero") from exc
    except (OverflowError, ValueError, TypeError) as exc:
        raise ToolError(str(exc)) from exc
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


async def _calculator(arguments: dict) -> str:
    return calculate(str(arguments.get("expression") or ""))


# --- shell (opt-in, confined to one directory) ----------------------------------------------


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
        command = str(arguments.get("command") or "").strip()
        if not command:
            raise ToolError("a command is required")
        self.check(command)
        process = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", command, cwd=self.root, env=self.environment(),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            output, _ = await asyncio.wait_for(process.communicate(), self.timeout)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            await process.wait()
            raise ToolError(f"the command ran longer than {self.timeout:g} s and was killed")
        text = output[:SHELL_OUTPUT_BYTES].decode(errors="replace")
        return f"exit {process.returncode}\n{text}"

    def tool(self) -> Tool:
        """Return the `shell` tool definition bound to this root."""
        return Tool(
            name="shell",
            description=f"Run a shell command in the working directory {self.root} (nothing outside it) and return its exit code and output.",
            parameters={"type": "object", "properties": {"command": {"type": "string", "description": "e.g. ls -la"}}, "required": ["command"]},
            run=self,
        )


def builtin_tools(*, shell_root: Path | None) -> dict[str, Tool]:
    """Return the tools of this machine by name (`shell` only with a root)."""
    tools = {
        "current_time": Tool(
            "current_time",
            "Return the current date and time, ISO 8601, in an IANA time zone (default UTC).",
            {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Paris"}}},
            _current_time,
        ),
        "calculator": Tool(
            "calculator",
            "Evaluate an arithmetic expression (+ - * / // % **, parentheses, sqrt, log, sin, …) and return its value.",
            {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]},
            _calculator,
        ),
    }
    if shell_root is not None:
        tools["shell"] = Shell(shell_root).tool()
    return tools


def _cut(text: str) -> str:
    raw = text.encode()
    if len(raw) <= MAX_RESULT_BYTES:
        return text
    return raw[:MAX_RESULT_BYTES].decode(errors="ignore") + TRUNCATED


async def invoke(tool: Tool | None, *, name: str, raw_arguments: str, timeout: float) -> tuple[str, bool]:
    """Run one tool call; return `(result text for the model, failed)`. Never raises."""
    import json

    if tool is None:
        return f"error: no tool named {name!r} on this machine", True
    if len((raw_arguments or "").encode()) > MAX_ARGUMENT_BYTES:
        return TOO_LARGE, True
    try:
        arguments = json.loads(raw_arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError("arguments must be a JSON object")
    except ValueError as exc:
        return f"error: the arguments are not a JSON object: {exc}", True
    try:
        result = await asyncio.wait_for(tool.run(arguments), timeout)
    except ToolError as exc:
        return f"error: {exc}", True
    except asyncio.TimeoutError:
        return f"error: the tool ran longer than {timeout:g} s", True
    except Exception as exc:  # a tool's own bug must not end the run
        return f"error: {exc.__class__.__name__}: {exc}", True
    return (_cut(result) if result else EMPTY), False
