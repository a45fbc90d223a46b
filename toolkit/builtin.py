"""The built-in tools: `current_time`, `calculator` and `http_get` — one implementation for the
server (`agents.tools.backends.builtin`) and a machine (`runner`).

`http_get` is off unless its caller names hosts (`AGENTS_TOOL_HTTP_ALLOW` on the server, the
runner's `--allow-http`): it fetches only http(s) URLs whose host the list names (an exact host,
or `*.example.com` for its subdomains) through `toolkit.outbound` (the connection goes to the
address that was checked), follows no redirect and reads at most 64 KiB.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import datetime
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolkit import outbound
from toolkit.calculator import calculate
from toolkit.invoke import Tool, ToolError

HTTP_READ_BYTES = 64 * 1024


def current_time(arguments: dict) -> str:
    """Return now in the IANA zone `arguments["timezone"]` (default UTC): `2026-01-02T03:04:05+00:00 (UTC)`."""
    name = str(arguments.get("timezone") or "UTC").strip() or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(f"{name!r} is not an IANA time zone") from exc
    return datetime.now(zone).replace(microsecond=0).isoformat() + f" ({name})"


def calculator(arguments: dict) -> str:
    """Return the value of the arithmetic `arguments["expression"]` (`toolkit.calculator`)."""
    return calculate(str(arguments.get("expression") or ""))


def http_get(arguments: dict, *, allow: Sequence[str], timeout: float, resolver: outbound.Resolver | None = None) -> str:
    """Fetch `arguments["url"]` when `allow` names its host; return `HTTP <status>` then ≤ 64 KiB of body.

    Raises `ToolError` for a URL that is not http(s), a host not on `allow`, a refused address
    and a failed fetch. A redirect is reported, not followed.
    """
    url = str(arguments.get("url") or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError("url must be an absolute http(s) URL")
    if not outbound.host_matches(allow, parts.hostname):
        raise ToolError(f"host {parts.hostname!r} is not on this deployment's allow-list")
    policy = outbound.Policy(allow_hosts=tuple(allow), **({"resolver": resolver} if resolver else {}))
    try:
        response = outbound.request(policy, "GET", url, timeout=timeout, max_bytes=HTTP_READ_BYTES)
    except outbound.Refused as exc:
        raise ToolError(f"refused: {exc}") from exc
    except outbound.Failed as exc:
        raise ToolError(f"fetch failed: {exc}") from exc
    head = f"HTTP {response.status_code}"
    if response.is_redirect:
        head += f" (redirect to {response.headers.get('location', '')}; not followed)"
    return f"{head}\n{response.text()}"


SPECS: dict[str, tuple[str, dict]] = {
    "current_time": (
        "Return the current date and time, ISO 8601, in an IANA time zone (default UTC).",
        {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Paris"}}},
    ),
    "calculator": (
        "Evaluate an arithmetic expression (+ - * / // % **, parentheses, sqrt, log, sin, …) and return its value.",
        {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (2 + 3) * 4 / sqrt(16)"}},
            "required": ["expression"],
        },
    ),
    "http_get": (
        "Fetch a URL with HTTP GET and return its status and the start of its body (allowed hosts only).",
        {"type": "object", "properties": {"url": {"type": "string", "description": "an http(s) URL"}}, "required": ["url"]},
    ),
}
BUILTIN_NAMES = tuple(SPECS)


def implementation(name: str, *, http_allow: Sequence[str] = (), http_timeout: float = 30.0) -> Callable[[dict], str]:
    """Return the blocking `f(arguments) -> text` of built-in `name` (KeyError for another name)."""
    if name == "http_get":
        allow = tuple(http_allow)
        return lambda arguments: http_get(arguments, allow=allow, timeout=http_timeout)
    return {"current_time": current_time, "calculator": calculator}[name]


def async_tools(*, http_allow: Sequence[str] = (), http_timeout: float = 30.0) -> dict[str, Tool]:
    """Return the built-ins as async `Tool`s by name (`http_get` only when `http_allow` names a host).

    Blocking work (a fetch) runs on a worker thread.
    """
    tools: dict[str, Tool] = {}
    for name, (description, parameters) in SPECS.items():
        if name == "http_get" and not http_allow:
            continue
        function = implementation(name, http_allow=http_allow, http_timeout=http_timeout)

        async def run(arguments: dict, function=function) -> str:
            return await asyncio.to_thread(function, arguments)

        tools[name] = Tool(name=name, description=description, parameters=parameters, run=run)
    return tools
