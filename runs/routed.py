"""The seam to routed runs: the `routed` kind's `RunPolicy.start` hands a run to a machine.

`POST /v1/agents/{ref}/run` with `targetId` is answered by the agents layer, but machines live
in the higher targets layer; its `routed` policy (`targets.wiring`) says how such a run starts,
so this layer never imports it.
"""

from __future__ import annotations

from agents_site.errors import ServiceUnavailable
from agents_site.vocabulary import RunKind
from runs.policies import UnknownRunKind, run_policy


def routed_start(**kwargs):
    """Route a run to a machine through the `routed` kind's `start`; return its run.

    `kwargs`: `agent, input, target_id, actor, request_id, idempotency_key`. Raises
    `ServiceUnavailable` (503) when no app registered a `routed` policy with a `start` (the
    targets app is not installed). An agent's approval rules travel with the run: the machine
    asks through the session and lets go of its claim while a person decides (issue 28 item 7,
    `targets.approvals`).
    """
    try:
        starter = run_policy(RunKind.ROUTED).start
    except UnknownRunKind:
        starter = None
    if starter is None:
        raise ServiceUnavailable("this deployment does not route runs to machines")
    return starter(**kwargs)
