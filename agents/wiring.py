"""What the agents app registers with the apps below it (each registry is listed in `server/registries.py`).

Imported once, from `AgentsConfig.ready()`: its imports reach models, which load after `apps.py`.
"""

from agents.execution import run_execute
from agents.execution.completion import complete, complete_async
from agents.execution.queued import execute_queued
from agents.execution.resume import run_resume
from agents.inference import inference_configured
from agents.tools.registry import resolve_tools
from agents_site.vocabulary import RefusalAnswer, RunKind
from runs import hooks
from runs.policies import RunPolicy, register_run_policy


def _tool_schema(tool_name: str, *, agent_name: str, depth: int) -> dict | None:
    """Return the JSON schema of tool `tool_name`'s arguments as agent `agent_name` sees it, or None."""
    resolution = resolve_tools([tool_name], agent_name=agent_name, depth=depth)
    tool = next((t for t in resolution.tools if t.name == tool_name), None)
    return (tool.definition().get("function") or {}).get("parameters") if tool is not None else None


def _register_run_policies() -> None:
    """Register the kinds of run this app owns (`runs.policies`; docs/guides/run-kinds.md).

    All three run the agent loop here: they call this deployment's gateway, and a run waiting
    for approval is resumed here (`run_resume`). `run` (sync or background) answers refusals with
    the error and its background runs are executed by a worker (`execute_queued`); `tool` (an
    agent called as a tool) is never queued: it is executed at once by `run_execute` (its `execute`); `scheduled` is always queued and records a refused
    slot as a finished `error` run "not started: …" (no caller is there to hear a 402).
    """
    register_run_policy(RunPolicy(kind=RunKind.RUN, execute_queued=execute_queued, resume=run_resume))
    register_run_policy(RunPolicy(kind=RunKind.TOOL, execute=run_execute, resume=run_resume))
    register_run_policy(RunPolicy(kind=RunKind.SCHEDULED, refusals=RefusalAnswer.RECORD, execute_queued=execute_queued,
                                  resume=run_resume))


def wire() -> None:
    """Register the agents' run kinds and what the run machinery (below this app) needs of its code."""
    _register_run_policies()
    hooks.register_inference_check(inference_configured)
    hooks.register_completion(complete, complete_async)  # what a run's `Ask` step waits on
    hooks.register_tool_schema(_tool_schema)  # an approver's edited arguments are checked against it
