"""The seam to routed runs: the targets app registers how a run is handed to a machine.

`POST /v1/agents/{ref}/run` with `targetId` is answered by the agents layer, but machines live
in the higher targets layer; it registers its starter here (`TargetsConfig.ready`), so this
layer never imports it.
"""

from __future__ import annotations

from collections.abc import Callable

from agents_site.errors import ServiceUnavailable

_starter: dict[str, Callable] = {}


def register_routed_start(starter: Callable) -> None:
    """Register `starter(*, agent, input, target_id, actor, request_id, idempotency_key) -> Run`."""
    _starter["routed"] = starter


def routed_start(**kwargs):
    """Route a run to a machine through the registered starter; return its run.

    Raises `ServiceUnavailable` (503) when no app registered one (the targets app is not
    installed). An agent's approval rules travel with the run: the machine asks through the
    session and lets go of its claim while a person decides (issue 28 item 7, `targets.approvals`).
    """
    starter = _starter.get("routed")
    if starter is None:
        raise ServiceUnavailable("this deployment does not route runs to machines")
    return starter(**kwargs)
