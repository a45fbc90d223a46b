"""Built-in tools: `current_time`, `calculator`, and `http_get` (off unless hosts are allowed).

`http_get` fetches only http(s) URLs whose host is listed in `AGENTS_TOOL_HTTP_ALLOW` (an exact
host, or `*.example.com` for its subdomains), follows no redirects and reads at most 64 KiB.
"""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from django.conf import settings

from agents.tools.backends.base import Resolution, Tool, ToolBackend, ToolContext, ToolError
from agents.tools.calculator import CalculatorError, calculate
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ToolSource

HTTP_READ_BYTES = 64 * 1024


def _current_time(arguments: dict, context: ToolContext) -> str:
    name = str(arguments.get("timezone") or "UTC").strip() or "UTC"
    try:
        zone = ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ToolError(f"{name!r} is not an IANA time zone") from exc
    return datetime.now(zone).replace(microsecond=0).isoformat() + f" ({name})"


def _calculator(arguments: dict, context: ToolContext) -> str:
    try:
        return calculate(str(arguments.get("expression") or ""))
    except CalculatorError as exc:
        raise ToolError(str(exc)) from exc


def http_allowed(host: str) -> bool:
    """Return True when `host` may be fetched by `http_get` under `AGENTS_TOOL_HTTP_ALLOW`."""
    host = (host or "").lower().rstrip(".")
    for entry in settings.AGENTS_TOOL_HTTP_ALLOW:
        entry = entry.lower().rstrip(".")
        if entry.startswith("*.") and host.endswith(entry[1:]):
            return True
        if host == entry:
            return True
    return False


def _http_get(arguments: dict, context: ToolContext) -> str:
    url = str(arguments.get("url") or "").strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ToolError("url must be an absolute http(s) URL")
    if not http_allowed(parts.hostname):
        raise ToolError(f"host {parts.hostname!r} is not on this deployment's allow-list")
    timeout = max(min(settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS, context.seconds_left()), 0.1)
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False) as client, client.stream("GET", url) as response:
            body = b""
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) >= HTTP_READ_BYTES:
                    break
            text = body[:HTTP_READ_BYTES].decode(response.encoding or "utf-8", errors="replace")
            head = f"HTTP {response.status_code}"
            if response.is_redirect:
                head += f" (redirect to {response.headers.get('location', '')}; not followed)"
            return f"{head}\n{text}"
    except httpx.HTTPError as exc:
        raise ToolError(f"fetch failed: {exc}") from exc


_SPECS = {
    "current_time": (
        "Return the current date and time, ISO 8601, in an IANA time zone (default UTC).",
        {"type": "object", "properties": {"timezone": {"type": "string", "description": "IANA zone, e.g. Europe/Paris"}}},
        _current_time,
    ),
    "calculator": (
        "Evaluate an arithmetic expression (+ - * / // % **, parentheses, sqrt, log, sin, …) and return its value.",
        {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "e.g. (2 + 3) * 4 / sqrt(16)"}},
            "required": ["expression"],
        },
        _calculator,
    ),
    "http_get": (
        "Fetch a URL with HTTP GET and return its status and the start of its body (allowed hosts only).",
        {"type": "object", "properties": {"url": {"type": "string", "description": "an http(s) URL"}}, "required": ["url"]},
        _http_get,
    ),
}

BUILTIN_NAMES = tuple(_SPECS)


def builtin_description(name: str) -> str:
    """Return the one-sentence description of built-in tool `name` (KeyError if it is not one)."""
    return _SPECS[name][0]


class BuiltinTools(ToolBackend):
    """The tools shipped with the platform."""

    source = ToolSource.BUILTIN

    def owns(self, name: str) -> bool:
        """Return True for `current_time`, `calculator` and `http_get`."""
        return name in _SPECS

    def validate(self, names: list[str], *, agent_name: str) -> None:
        """Refuse `http_get` while `AGENTS_TOOL_HTTP_ALLOW` is empty (the tool is off)."""
        if "http_get" in names and not settings.AGENTS_TOOL_HTTP_ALLOW:
            raise InvalidRequest('tool "http_get" is off on this deployment (AGENTS_TOOL_HTTP_ALLOW lists no host)')

    def resolve(self, names: list[str], *, agent_name: str) -> Resolution:
        """Return the built-ins named; `http_get` is not offered while it is off."""
        resolution = Resolution()
        for name in names:
            if name == "http_get" and not settings.AGENTS_TOOL_HTTP_ALLOW:
                resolution.not_offered[name] = "http_get is off on this deployment"
                continue
            description, parameters, invoke = _SPECS[name]
            resolution.tools.append(Tool(name=name, description=description, parameters=parameters, source=self.source, invoke=invoke))
        return resolution
