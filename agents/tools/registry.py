"""Resolve an agent's tool names against the sources: built-ins, agents, MCP servers.

`validate_tool_names` is what agent create/patch calls (400 for an unknown name);
`resolve_tools` is what a run calls to know what it offers. Org context required.
"""

from __future__ import annotations

import re

from django.conf import settings

from agents.tools.backends.agents import AgentTools
from agents.tools.backends.base import Resolution, Tool, ToolBackend
from agents.tools.backends.builtin import BUILTIN_NAMES, BuiltinTools, builtin_description, builtin_unavailable
from agents.tools.backends.machine import MachineTools
from agents.models import Agent, McpServer
from agents.tools.backends.mcp import McpTools, McpUnavailable, list_server_tools
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import AgentHosting, ToolSource

BACKENDS: tuple[ToolBackend, ...] = (BuiltinTools(), AgentTools(), McpTools(), MachineTools())
WIRE_NAME_RE = re.compile(r"[^A-Za-z0-9_-]")
WIRE_NAME_MAX = 64


def backend_for(name: str) -> ToolBackend | None:
    """Return the source that owns `name`, or None when no source does."""
    for backend in BACKENDS:
        if backend.owns(name):
            return backend
    return None


def _grouped(names: list[str]) -> dict[ToolBackend, list[str]]:
    groups: dict[ToolBackend, list[str]] = {}
    for name in names:
        backend = backend_for(name)
        if backend is None:
            known = ", ".join(BUILTIN_NAMES)
            raise InvalidRequest(f'unknown tool "{name}": tools are {known}, agent_<name> or mcp__<server>__<tool>')
        groups.setdefault(backend, []).append(name)
    return groups


def validate_tool_names(names: list[str], *, agent_name: str) -> None:
    """Raise `InvalidRequest` (400) unless every name in `names` can be served to `agent_name`.

    Unknown built-ins, `agent_<self>`, agents the org lacks, and MCP tools of servers the org
    has not registered (or that do not list the tool) are refused. Nothing is written.
    """
    for backend, group in _grouped(list(names)).items():
        backend.validate(group, agent_name=agent_name)


def _wire_name(name: str, taken: set[str]) -> str:
    base = WIRE_NAME_RE.sub("_", name)[:WIRE_NAME_MAX] or "tool"
    candidate, n = base, 2
    while candidate in taken:
        suffix = f"_{n}"
        candidate, n = base[: WIRE_NAME_MAX - len(suffix)] + suffix, n + 1
    taken.add(candidate)
    return candidate


def resolve_tools(names: list[str], *, agent_name: str, depth: int) -> Resolution:
    """Return the tools a run of `agent_name` at nesting `depth` offers, each with a wire name.

    Nothing is offered at depth ≥ `AGENTS_MAX_AGENT_DEPTH`. A name no source can serve now is
    not offered; `not_offered` says why (the run logs it to its session).
    """
    resolution = Resolution()
    if not names:
        return resolution
    if depth >= settings.AGENTS_MAX_AGENT_DEPTH:
        resolution.not_offered = {name: f"nesting depth {depth} offers no tools" for name in names}
        return resolution
    taken: set[str] = set()
    groups: dict[ToolBackend, list[str]] = {}
    for name in names:
        backend = backend_for(name)
        if backend is None:
            resolution.not_offered[name] = "unknown tool"
        else:
            groups.setdefault(backend, []).append(name)
    offered: dict[str, Tool] = {}
    for backend, group in groups.items():
        part = backend.resolve(group, agent_name=agent_name)
        resolution.not_offered.update(part.not_offered)
        for tool in part.tools:
            offered[tool.name] = tool
    for name in names:  # keep the agent's declared order
        tool = offered.get(name)
        if tool is not None:
            tool.wire_name = _wire_name(tool.name, taken)
            resolution.tools.append(tool)
    return resolution


def tool_choices(*, agent_name: str = "") -> list[dict]:
    """Return the tools an agent of the current org could declare, for pickers: `[{name, source, description}]`.

    A tool this deployment does not offer carries `"unavailable": True` and `reason`, why in a
    user's words (`http_get` while no web host is allowed; an MCP server that does not answer).
    Built-ins (with their descriptions), every other agent of the org as `agent_<name>` (an
    agent never calls itself; external agents run elsewhere and are left out), and each
    registered MCP server's tools as `mcp__<server>__<tool>` when its listing is cached or it
    answers now (a server that does not answer is listed as unavailable, never waited on
    twice: the listing is cached). Org context required; reads only.
    """
    choices = []
    for name in BUILTIN_NAMES:
        choice = {"name": name, "source": ToolSource.BUILTIN, "description": builtin_description(name)}
        if reason := builtin_unavailable(name):
            choice.update(unavailable=True, reason=reason)
        choices.append(choice)
    for agent in Agent.objects.exclude(name=agent_name).exclude(hosting=AgentHosting.EXTERNAL).order_by("name").only("name", "description"):
        choices.append({"name": f"agent_{agent.name}", "source": ToolSource.AGENT, "description": agent.description or f"Run the agent {agent.name}"})
    for server in McpServer.objects.order_by("name"):
        try:
            listing = list_server_tools(server)
        except McpUnavailable as exc:
            choices.append({"name": f"mcp__{server.name}__", "source": ToolSource.MCP, "description": str(exc), "unavailable": True,
                            "reason": f"the MCP server {server.name} did not answer, so its tools cannot be listed"})
            continue
        for tool, spec in sorted(listing.items()):
            choices.append({"name": f"mcp__{server.name}__{tool}", "source": ToolSource.MCP, "description": (spec or {}).get("description") or ""})
    return choices
