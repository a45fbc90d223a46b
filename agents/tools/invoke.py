"""Run one tool call the model asked for, with the spec's bounds (reference §3.6).

The bounds and the error text are `toolkit.invoke`'s (shared with the runner): arguments over
32 KiB are refused to the model; a result is cut at 16 KiB; a tool's error, bad JSON arguments
and an unknown tool all go back to the model as `error: …` text, never raised.
"""

from __future__ import annotations

import logging

from agents.tools.backends.base import Tool, ToolContext, ToolError
from toolkit.invoke import EMPTY, MAX_ARGUMENT_BYTES, MAX_RESULT_BYTES, TOO_LARGE, TRUNCATED, cut, failure, parse_arguments, settle

logger = logging.getLogger(__name__)

__all__ = ["EMPTY", "MAX_ARGUMENT_BYTES", "MAX_RESULT_BYTES", "TOO_LARGE", "TRUNCATED", "cut", "invoke_tool"]


def invoke_tool(tool: Tool | None, *, wire_name: str, raw_arguments: str, context: ToolContext) -> tuple[str, bool]:
    """Run `tool` with the model's JSON `raw_arguments`; return `(result text, failed)`.

    `tool` None means the model named a tool that was not offered. Never raises for a tool's
    own failure: the text starts `error: ` and `failed` is True.
    """
    if tool is None:
        return f"error: no tool named {wire_name!r} is offered to this agent", True
    try:
        arguments = parse_arguments(raw_arguments)
    except ToolError as exc:
        return f"error: {exc}", True
    if context.seconds_left() <= 0:
        return "error: the run ran out of time before this call", True
    try:
        result = tool.invoke(arguments, context)
    except ToolError as exc:
        return failure(exc), True
    except Exception as exc:  # a tool's bug must reach the model as text, not fail the run
        logger.exception("tool %s failed", tool.name)
        return failure(exc), True
    return settle(result)
