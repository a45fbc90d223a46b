"""The one run lifecycle (DESIGN §4): every kind of run starts with `run_start` and ends with `run_finish`."""

from agents.runs.lifecycle import (
    AgentExternal,
    InferenceUnavailable,
    Outcome,
    RunNotQueued,
    check_input,
    run_finish,
    run_mark_running,
    run_start,
    stop_reason,
)

__all__ = [
    "AgentExternal",
    "InferenceUnavailable",
    "Outcome",
    "RunNotQueued",
    "check_input",
    "run_finish",
    "run_mark_running",
    "run_start",
    "stop_reason",
]
