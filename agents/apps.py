from django.apps import AppConfig


def _tool_schema(tool_name: str, *, agent_name: str, depth: int) -> dict | None:
    """Return the JSON schema of tool `tool_name`'s arguments as agent `agent_name` sees it, or None."""
    from agents.tools.registry import resolve_tools

    resolution = resolve_tools([tool_name], agent_name=agent_name, depth=depth)
    tool = next((t for t in resolution.tools if t.name == tool_name), None)
    return (tool.definition().get("function") or {}).get("parameters") if tool is not None else None


def _register_run_policies() -> None:
    """Register the rules of the kinds of run this app owns (`runs.policies`).

    `run` (sync or background) and `tool` (an agent called as a tool) call this deployment's
    gateway and answer refusals with the error; `scheduled` records a refused slot as a
    finished `error` run "not started: …" (no caller is there to hear a 402).
    """
    from runs.policies import RunPolicy, register_run_policy
    from agents_site.vocabulary import RefusalAnswer, RunKind

    register_run_policy(RunPolicy(kind=RunKind.RUN))
    register_run_policy(RunPolicy(kind=RunKind.TOOL))
    register_run_policy(RunPolicy(kind=RunKind.SCHEDULED, refusals=RefusalAnswer.RECORD))


class AgentsConfig(AppConfig):
    """Agent definitions (each org's own store); their runs are the `runs` app's."""

    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents.execution.completion import complete, complete_async
        from agents.execution.queued import execute_queued
        from agents.execution.resume import run_resume
        from agents.inference import inference_configured
        from runs import hooks

        _register_run_policies()
        # What the run machinery (below this app) needs of the agents' own code.
        hooks.register_run_executor(execute_queued)  # a background worker's run: the agent loop
        hooks.register_run_resumer(run_resume)  # a run whose approvals are all answered
        hooks.register_inference_check(inference_configured)
        hooks.register_completion(complete, complete_async)  # what a run's `Ask` step waits on
        hooks.register_tool_schema(_tool_schema)  # an approver's edited arguments are checked against it
