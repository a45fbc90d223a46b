"""Executing a run in this process (DESIGN §4): `run_execute` (sync) and `run_execute_started` (a worker's)."""

from agents.execution.loop import RunListener, WholeAnswer
from agents.execution.service import run_execute, run_execute_opened, run_execute_started, run_open, run_span

__all__ = ["RunListener", "WholeAnswer", "run_execute", "run_execute_opened", "run_execute_started", "run_open", "run_span"]
