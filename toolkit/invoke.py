"""Running one tool call the model asked for, with the spec's bounds (reference §3.6).

The rules every tool call follows, on the server and on a machine: arguments over 32 KiB are
refused to the model (`TOO_LARGE`); arguments must be a JSON object; a result is cut at 16 KiB
with `TRUNCATED` appended; an empty result reads `EMPTY`; a tool's refusal (`ToolError`), bad
arguments, an unknown tool and a tool's own bug all go back to the model as `error: …` text,
never raised.

`parse_arguments`, `failure` and `settle` are the pieces; `invoke` puts them together for an
async `Tool` (the runner's loop; the server's `agents.tools.invoke.invoke_tool` uses the same
pieces around its sync tools).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

MAX_ARGUMENT_BYTES = 32 * 1024
MAX_RESULT_BYTES = 16 * 1024
TRUNCATED = "\n…[truncated: the result was longer than this agent may read]"
EMPTY = "(the tool ran and returned nothing)"
TOO_LARGE = "error: the arguments for this call were too large to run"


class ToolError(Exception):
    """A tool call was refused or failed; the model reads `error: <message>`."""


def cut(text: str, limit: int = MAX_RESULT_BYTES) -> str:
    """Return `text` cut to `limit` UTF-8 bytes (whole characters) with the truncation notice, or unchanged."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[:limit].decode(errors="ignore") + TRUNCATED


def parse_arguments(raw_arguments: str | None) -> dict:
    """Return the model's JSON arguments as a dict ("" means `{}`).

    Raises `ToolError` when they are over `MAX_ARGUMENT_BYTES` (its text is `TOO_LARGE` without
    the `error: ` prefix), not JSON, or not a JSON object.
    """
    raw_arguments = raw_arguments or "{}"
    if len(raw_arguments.encode()) > MAX_ARGUMENT_BYTES:
        raise ToolError(TOO_LARGE.removeprefix("error: "))
    try:
        arguments = json.loads(raw_arguments)
    except json.JSONDecodeError as exc:
        raise ToolError(f"the arguments were not valid JSON: {exc.msg}") from None
    if not isinstance(arguments, dict):
        raise ToolError("the arguments must be a JSON object")
    return arguments


def failure(exc: BaseException) -> str:
    """Return the model's text for a failed call: `error: <why>` (a bug also names its type), cut."""
    if isinstance(exc, ToolError):
        return cut(f"error: {exc}")
    return cut(f"error: {type(exc).__name__}: {exc}")


def settle(result: object) -> tuple[str, bool]:
    """Return `(text for the model, False)` for a tool's result: `EMPTY` when blank, else cut."""
    text = "" if result is None else str(result)
    if not text.strip():
        return EMPTY, False
    return cut(text), False


@dataclass
class Tool:
    """One async tool the model may call: its schema and `run(arguments) -> text` (raises `ToolError`)."""

    name: str
    description: str
    parameters: dict
    run: Callable[[dict], Awaitable[str]]

    def definition(self) -> dict:
        """Return the OpenAI `tools` entry of this tool."""
        return {"type": "function", "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


async def invoke(tool: Tool | None, *, name: str, raw_arguments: str, timeout: float,
                 missing: str = "on this machine") -> tuple[str, bool]:
    """Run one call of async `tool` within `timeout` seconds; return `(result text, failed)`.

    `tool` None means the model named a tool that was not offered (`missing` says where:
    "error: no tool named 'x' on this machine"). Never raises but `CancelledError` (the
    caller stopped; a command the tool ran is killed).
    """
    if tool is None:
        return f"error: no tool named {name!r} {missing}", True
    # The call runs in the caller's task (asyncio.timeout, not wait_for), so a stop reaches the
    # tool as the caller's own cancellation and a killed command's `CommandCancelled` (with its
    # output so far) comes back out unchanged.
    deadline = asyncio.timeout(timeout)
    try:
        arguments = parse_arguments(raw_arguments)
        async with deadline:
            result = await tool.run(arguments)
    except TimeoutError:
        return f"error: the tool ran longer than {timeout:g} s", True
    except asyncio.CancelledError:
        if deadline.expired():  # our own limit, raised as a CancelledError subclass (Python 3.11 passes it through)
            return f"error: the tool ran longer than {timeout:g} s", True
        raise
    except Exception as exc:  # a tool's refusal or its own bug must reach the model as text, not end the run
        if not isinstance(exc, ToolError):
            logger.warning("tool %s failed", name, exc_info=True)
        return failure(exc), True
    return settle(result)
