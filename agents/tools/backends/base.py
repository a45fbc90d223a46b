"""The contract every tool source implements, and the shapes a run uses to call a tool."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from agents_site.vocabulary import ToolSource
from toolkit.invoke import ToolError  # one error type for every tool, server and machine
from toolkit.stopping import StopSignal

__all__ = ["Resolution", "Tool", "ToolBackend", "ToolContext", "ToolError"]


@dataclass(frozen=True)
class ToolContext:
    """Who a tool call runs for and until when.

    `deadline` is a `time.monotonic()` value; `depth` is the nesting depth of the calling run
    (0 for a run started by a caller, +1 for each agent called as a tool). `stop` is the calling
    run's stop signal (None: not stoppable): a tool that waits (an agent's run, an MCP call)
    gives up at once when it is set (issue 25).
    """

    org_slug: str
    actor: str
    request_id: str
    run_id: str
    session_id: str
    depth: int
    deadline: float
    stop: StopSignal | None = None

    def seconds_left(self) -> float:
        """Return the seconds left before `deadline` (never negative)."""
        return max(self.deadline - time.monotonic(), 0.0)


@dataclass
class Tool:
    """One tool offered to a model.

    `name` is the name the agent declares; `wire_name` the function name sent to the gateway
    (`^[A-Za-z0-9_-]{1,64}$`); `parameters` a JSON schema; `invoke(arguments, context)` returns
    the result text or raises `ToolError`.
    """

    name: str
    description: str
    parameters: dict
    source: ToolSource
    invoke: Callable[[dict, ToolContext], str]
    wire_name: str = ""

    def definition(self) -> dict:
        """Return the OpenAI `tools` entry of this tool."""
        return {
            "type": "function",
            "function": {"name": self.wire_name or self.name, "description": self.description, "parameters": self.parameters},
        }


@dataclass
class Resolution:
    """What a source offers for some declared names, and why the others are not offered."""

    tools: list[Tool] = field(default_factory=list)
    not_offered: dict[str, str] = field(default_factory=dict)  # name → reason


class ToolBackend(ABC):
    """A source of tools. Each declared name belongs to exactly one source (`owns`)."""

    source: ToolSource

    @abstractmethod
    def owns(self, name: str) -> bool:
        """Return True when `name` is this source's kind of name (it may still be unknown)."""

    @abstractmethod
    def validate(self, names: list[str], *, agent_name: str) -> None:
        """Raise `InvalidRequest` (400) for a name this source cannot serve. Org context required."""

    @abstractmethod
    def resolve(self, names: list[str], *, agent_name: str) -> Resolution:
        """Return the tools to offer for `names` (a name that cannot be served is not offered)."""
