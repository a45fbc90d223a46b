"""Run one tool call the model asked for, with the spec's bounds (reference §3.6).

Arguments over 32 KiB are refused to the model; a result is cut at 16 KiB; a tool's error, bad
JSON arguments and an unknown tool all go back to the model as `error: …` text, never raised.
"""

from __future__ import annotations

import json
import logging

from agents.tools.backends.base import Tool, ToolContext, ToolError

logger = logging.getLogger(__name__)

MAX_ARGUMENT_BYTES = 32 * 1024
MAX_RESULT_BYTES = 16 * 1024
TRUNCATED = "\n…[truncated: the result was longer than this agent may read]"
EMPTY = "(the tool ran and returned nothing)"
TOO_LARGE = "error: the arguments for this call were too large to run"


def cut(text: str, limit: int = MAX_RESULT_BYTES) -> str:
    """Return `text` cut to `limit` UTF-8 bytes with the truncation notice, or unchanged."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[:limit].decode(errors="ignore") + TRUNCATED


def invoke_tool(tool: Tool | None, *, wire_name: str, raw_arguments: str, context: ToolContext) -> tuple[str, bool]:
    """Run `tool` with the model's JSON `raw_arguments`; return `(result text, failed)`.

    `tool` None means the model named a tool that was not offered. Never raises for a tool's
    own failure: the text starts `error: ` and `failed` is True.
    """
    if tool is None:
        return f"error: no tool named {wire_name!r} is offered to this agent", True
    raw_arguments = raw_arguments or "{}"
    if len(raw_arguments.encode()) > MAX_ARGUMENT_BYTES:
        return TOO_LARGE, True
    try:
        arguments = json.loads(raw_arguments)
    except json.JSONDecodeError as exc:
        return f"error: the arguments were not valid JSON: {exc.msg}", True
    if not isinstance(arguments, dict):
        return "error: the arguments must be a JSON object", True
    if context.seconds_left() <= 0:
        return "error: the run ran out of time before this call", True
    try:
        result = tool.invoke(arguments, context)
    except ToolError as exc:
        return cut(f"error: {exc}"), True
    except Exception as exc:  # a tool's bug must reach the model as text, not fail the run
        logger.exception("tool %s failed", tool.name)
        return cut(f"error: {type(exc).__name__}: {exc}"), True
    result = "" if result is None else str(result)
    if not result.strip():
        return EMPTY, False
    return cut(result), False
