"""The one run path (DESIGN §4): `run_execute` for every caller, `run_queue` for background runs."""

from agents.execution.service import InferenceUnavailable, RunNotQueued, check_input, run_execute, run_queue

__all__ = ["InferenceUnavailable", "RunNotQueued", "check_input", "run_execute", "run_queue"]
