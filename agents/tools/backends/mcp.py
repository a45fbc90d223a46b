"""Tools served by MCP servers the org registered (`McpServer`), named `mcp__<server>__<tool>`.

Talks to each server with the `mcp` SDK's `Client`: a stdio server is started as a command on
this host for each listing or call (only when `AGENTS_MCP_STDIO` is on); an `http` server is a
streamable-HTTP URL reached through `toolkit.outbound` (the SDK is handed a client whose every
connection goes to the address that was checked): a private, loopback, link-local, CGNAT or
metadata address is refused unless `AGENTS_MCP_ALLOW_HOSTS` names the host. Listings are cached
per process for `AGENTS_MCP_LIST_TTL_SECONDS`; each call is bounded by `AGENTS_TOOL_CALL_TIMEOUT_SECONDS` (and the run's deadline).
A stop of the calling run cancels a call in flight (its task is cancelled: the HTTP request is
closed, a stdio server's process is ended by the SDK) and the call answers nothing (issue 25).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager

import anyio
from django.conf import settings

from agents.models import McpServer
from agents.tools.backends.base import Resolution, Tool, ToolBackend, ToolContext, ToolError
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import McpTransport, ToolSource
from tenancy import stores
from toolkit import outbound
from toolkit.stopping import run_stoppable

logger = logging.getLogger(__name__)

PREFIX = "mcp__"
SEPARATOR = "__"
LIST_PAGES = 10

_cache_lock = threading.Lock()
_listings: dict[tuple, tuple[float, dict[str, dict]]] = {}


class McpUnavailable(Exception):
    """The server could not be reached or did not answer in time."""


def parse_name(name: str) -> tuple[str, str] | None:
    """Split `mcp__<server>__<tool>` into `(server, tool)`; None when malformed."""
    if not name.startswith(PREFIX):
        return None
    server, sep, tool = name[len(PREFIX) :].partition(SEPARATOR)
    if not sep or not server or not tool:
        return None
    return server, tool


def _target(server: McpServer):
    """Return the SDK's stdio parameters, or `(url, policy)` for an HTTP server (checked before any request)."""
    from mcp import StdioServerParameters

    if server.transport == McpTransport.STDIO:
        return StdioServerParameters(command=server.command, args=[str(a) for a in (server.args or [])])
    policy = outbound.Policy(allow_hosts=tuple(settings.AGENTS_MCP_ALLOW_HOSTS))
    policy.check_url(server.url)
    return server.url, policy


@asynccontextmanager
async def _client(target, timeout: float):
    """Yield a connected SDK `Client` for `target` (an HTTP server over the outbound module's client)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    if not isinstance(target, tuple):
        async with Client(target, read_timeout_seconds=timeout) as client:
            yield client
        return
    url, policy = target
    async with outbound.async_client(policy, timeout=timeout) as http:
        async with Client(streamable_http_client(url, http_client=http), read_timeout_seconds=timeout) as client:
            yield client


def _run_async(fn, *args):
    """Run the async `fn(*args)` to completion from sync code (in a helper thread if a loop runs here)."""
    try:
        import asyncio

        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(fn, *args)
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, fn, *args).result()


async def _list(target, timeout: float) -> dict[str, dict]:
    tools: dict[str, dict] = {}
    with anyio.fail_after(timeout):
        async with _client(target, timeout) as client:
            cursor = None
            for _ in range(LIST_PAGES):
                page = await client.list_tools(cursor=cursor)
                for tool in page.tools:
                    tools[tool.name] = {"description": tool.description or "", "parameters": tool.input_schema or {}}
                cursor = page.next_cursor
                if not cursor:
                    break
    return tools


async def _call(target, name: str, arguments: dict, timeout: float):
    with anyio.fail_after(timeout):
        async with _client(target, timeout) as client:
            return await client.call_tool(name, arguments)


def _stdio_allowed(server: McpServer) -> bool:
    return server.transport != McpTransport.STDIO or settings.AGENTS_MCP_STDIO


def list_server_tools(server: McpServer, *, fresh: bool = False) -> dict[str, dict]:
    """Return `{tool name: {"description", "parameters"}}` the server serves (cached).

    Raises `McpUnavailable` when it cannot be reached or does not answer in time.
    """
    key = (stores.current_org(), server.pk, server.updated_at)
    now = time.monotonic()
    with _cache_lock:
        cached = _listings.get(key)
    if cached and not fresh and now - cached[0] < settings.AGENTS_MCP_LIST_TTL_SECONDS:
        return cached[1]
    try:
        tools = _run_async(_list, _target(server), settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS)
    except Exception as exc:  # the SDK raises transport, protocol and timeout errors alike
        if refused := _refusal(exc):
            raise McpUnavailable(f"MCP server {server.name!r} refused destination: {refused}"[:300]) from exc
        raise McpUnavailable(f"MCP server {server.name!r} did not answer: {type(exc).__name__}: {exc}"[:300]) from exc
    with _cache_lock:
        _listings[key] = (now, tools)
    return tools


def _refusal(exc: BaseException | None, depth: int = 0) -> outbound.Refused | None:
    """Return the `outbound.Refused` behind `exc` (the SDK wraps it in groups and causes), or None."""
    if exc is None or depth > 8:
        return None
    if isinstance(exc, outbound.Refused):
        return exc
    for inner in (*getattr(exc, "exceptions", ()), exc.__cause__, exc.__context__):
        if found := _refusal(inner, depth + 1):
            return found
    return None


def _render(result) -> str:
    parts: list[str] = []
    for block in result.content or []:
        text = getattr(block, "text", None)
        parts.append(text if text is not None else json.dumps(block.model_dump(mode="json", by_alias=True)))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


def _invoker(server: McpServer, tool: str):
    def invoke(arguments: dict, context: ToolContext) -> str:
        timeout = max(min(settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS, context.seconds_left()), 0.1)
        try:
            target = _target(server)
            result = run_stoppable(lambda: _call(target, tool, arguments, timeout), context.stop)
        except asyncio.CancelledError as exc:  # the run's stop cancelled the call (its connection or process is closed)
            raise ToolError("the MCP call was cancelled: the run was stopped") from exc
        except TimeoutError as exc:
            raise ToolError(f"the MCP tool did not answer within {timeout:g} s") from exc
        except Exception as exc:
            if refused := _refusal(exc):
                raise ToolError(f"MCP call refused destination: {refused}"[:500]) from exc
            raise ToolError(f"MCP call failed: {type(exc).__name__}: {exc}"[:500]) from exc
        text = _render(result)
        if result.is_error:
            raise ToolError(text or "the MCP tool reported an error")
        return text

    return invoke


def _servers(names: list[str]) -> dict[str, McpServer]:
    wanted = {parsed[0] for parsed in map(parse_name, names) if parsed}
    return {s.name: s for s in McpServer.objects.filter(name__in=wanted, enabled=True)}


class McpTools(ToolBackend):
    """Tools of the org's registered MCP servers."""

    source = ToolSource.MCP

    def owns(self, name: str) -> bool:
        """Return True for names starting `mcp__`."""
        return name.startswith(PREFIX)

    def validate(self, names: list[str], *, agent_name: str) -> None:
        """Refuse malformed names, unregistered or disabled servers, and tools a server does
        not list (400). A registered server that cannot be reached is not held against the
        name (fail-open, like the model catalog): it is checked again at run time."""
        servers = _servers(names)
        for name in names:
            parsed = parse_name(name)
            if parsed is None:
                raise InvalidRequest(f'unknown tool "{name}": MCP tools are named mcp__<server>__<tool>')
            server = servers.get(parsed[0])
            if server is None:
                raise InvalidRequest(f'unknown tool "{name}": no enabled MCP server "{parsed[0]}" in this org')
            if not _stdio_allowed(server):
                raise InvalidRequest(f'tool "{name}": stdio MCP servers are off on this deployment (AGENTS_MCP_STDIO)')
            try:
                listed = list_server_tools(server)
            except McpUnavailable:
                logger.warning("MCP server %s unreachable while validating %s", server.name, name)
                continue
            if parsed[1] not in listed:
                raise InvalidRequest(f'unknown tool "{name}": MCP server "{server.name}" does not serve "{parsed[1]}"')

    def resolve(self, names: list[str], *, agent_name: str) -> Resolution:
        """Offer each named tool its server lists now; the rest are not offered, with a reason."""
        resolution = Resolution()
        servers = _servers(names)
        for name in names:
            parsed = parse_name(name)
            server = servers.get(parsed[0]) if parsed else None
            if server is None:
                resolution.not_offered[name] = "no enabled MCP server of that name"
                continue
            if not _stdio_allowed(server):
                resolution.not_offered[name] = "stdio MCP servers are off on this deployment"
                continue
            try:
                listed = list_server_tools(server)
            except McpUnavailable as exc:
                resolution.not_offered[name] = str(exc)
                continue
            spec = listed.get(parsed[1])
            if spec is None:
                resolution.not_offered[name] = "the server does not serve this tool"
                continue
            parameters = spec["parameters"] or {"type": "object", "properties": {}}
            resolution.tools.append(
                Tool(
                    name=name,
                    description=spec["description"] or f"{parsed[1]} (MCP server {server.name})",
                    parameters=parameters,
                    source=self.source,
                    invoke=_invoker(server, parsed[1]),
                )
            )
        return resolution
