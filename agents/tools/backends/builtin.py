"""Built-in tools on the server: `current_time`, `calculator`, and `http_get` (off unless hosts are allowed).

The tools themselves are `toolkit.builtin`'s (shared with the runner); this adapter offers them
as a tool source. `http_get` fetches only hosts listed in `AGENTS_TOOL_HTTP_ALLOW` (an exact
host, or `*.example.com` for its subdomains) through `toolkit.outbound`, follows no redirects
and reads at most 64 KiB, within `AGENTS_TOOL_CALL_TIMEOUT_SECONDS` and the run's deadline.
"""

from __future__ import annotations

from django.conf import settings

from agents.tools.backends.base import Resolution, Tool, ToolBackend, ToolContext
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ToolSource
from toolkit import builtin

BUILTIN_NAMES = builtin.BUILTIN_NAMES


def _http_get(arguments: dict, context: ToolContext) -> str:
    timeout = max(min(settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS, context.seconds_left()), 0.1)
    return builtin.http_get(arguments, allow=settings.AGENTS_TOOL_HTTP_ALLOW, timeout=timeout)


def _invoker(name: str):
    if name == "http_get":
        return _http_get
    function = builtin.implementation(name)
    return lambda arguments, context: function(arguments)


#: Why `http_get` is not offered, in a user's words (the API's 400 and the console's picker say it;
#: the setting's name is for operators, in docs/operations/environment.md).
HTTP_GET_OFF = "this deployment does not let agents fetch web pages (its operator has allowed no web host)"


def builtin_unavailable(name: str) -> str:
    """Return why built-in `name` is not offered on this deployment, "" when it is."""
    if name == "http_get" and not settings.AGENTS_TOOL_HTTP_ALLOW:
        return HTTP_GET_OFF
    return ""


def builtin_description(name: str) -> str:
    """Return the one-sentence description of built-in tool `name` (KeyError if it is not one)."""
    return builtin.SPECS[name][0]


class BuiltinTools(ToolBackend):
    """The tools shipped with the platform."""

    source = ToolSource.BUILTIN

    def owns(self, name: str) -> bool:
        """Return True for `current_time`, `calculator` and `http_get`."""
        return name in builtin.SPECS

    def validate(self, names: list[str], *, agent_name: str) -> None:
        """Refuse `http_get` while `AGENTS_TOOL_HTTP_ALLOW` is empty (the tool is off)."""
        if "http_get" in names and builtin_unavailable("http_get"):
            raise InvalidRequest(f'tool "http_get" is off: {HTTP_GET_OFF}')

    def resolve(self, names: list[str], *, agent_name: str) -> Resolution:
        """Return the built-ins named; `http_get` is not offered while it is off."""
        resolution = Resolution()
        for name in names:
            if builtin_unavailable(name):
                resolution.not_offered[name] = builtin_unavailable(name)
                continue
            description, parameters = builtin.SPECS[name]
            resolution.tools.append(Tool(name=name, description=description, parameters=parameters, source=self.source, invoke=_invoker(name)))
        return resolution
