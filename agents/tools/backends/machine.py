"""Machine tools: names only a registered machine's runner serves (`shell`).

An agent may declare them; a run routed to a machine (`targetId`) offers them there when the
machine's daemon allows them (`--allow-shell DIR`). The server's own loop never runs them: it
lists them as not offered, with the reason.
"""

from __future__ import annotations

from agents.tools.backends.base import Resolution, ToolBackend
from agents_site.vocabulary import ToolSource

MACHINE_TOOL_NAMES = ("shell",)


class MachineTools(ToolBackend):
    """Tools that exist only on registered machines (see `toolkit.shell`)."""

    source = ToolSource.MACHINE

    def owns(self, name: str) -> bool:
        """Return True for `shell`."""
        return name in MACHINE_TOOL_NAMES

    def validate(self, names: list[str], *, agent_name: str) -> None:
        """Accept every machine tool name: whether a machine serves it is its daemon's choice."""

    def resolve(self, names: list[str], *, agent_name: str) -> Resolution:
        """Offer nothing on the server; say where these tools run."""
        return Resolution(not_offered={name: "runs only on a registered machine (route the run with targetId)" for name in names})
