"""The one run lifecycle (DESIGN §4): every kind of run starts with `run_start` / `run_starting` (a
`RunRequest`, under its kind's registered `RunPolicy`) and ends with `run_finish` / `run_finishing`."""

from agents.runs.lifecycle import (
    AgentExternal,
    InferenceUnavailable,
    Outcome,
    RunNotQueued,
    check_input,
    run_finish,
    run_finishing,
    run_mark_running,
    run_replay,
    run_start,
    run_starting,
    stop_reason,
)
from agents.runs.policies import RunPolicy, UnknownRunKind, register_run_policy, run_policy
from agents.runs.request import RunRequest

__all__ = [
    "AgentExternal",
    "InferenceUnavailable",
    "Outcome",
    "RunNotQueued",
    "RunPolicy",
    "RunRequest",
    "UnknownRunKind",
    "check_input",
    "register_run_policy",
    "run_finish",
    "run_finishing",
    "run_mark_running",
    "run_policy",
    "run_replay",
    "run_start",
    "run_starting",
    "stop_reason",
]
