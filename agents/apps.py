from django.apps import AppConfig


def _tool_schema(tool_name: str, *, agent_name: str, depth: int) -> dict | None:
    """Return the JSON schema of tool `tool_name`'s arguments as agent `agent_name` sees it, or None."""
    from agents.tools.registry import resolve_tools

    resolution = resolve_tools([tool_name], agent_name=agent_name, depth=depth)
    tool = next((t for t in resolution.tools if t.name == tool_name), None)
    return (tool.definition().get("function") or {}).get("parameters") if tool is not None else None


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

        # What the run machinery (below this app) needs of the agents' own code.
        hooks.register_run_executor(execute_queued)  # a background worker's run: the agent loop
        hooks.register_run_resumer(run_resume)  # a run whose approvals are all answered
        hooks.register_inference_check(inference_configured)
        hooks.register_completion(complete, complete_async)  # what a run's `Ask` step waits on
        hooks.register_tool_schema(_tool_schema)  # an approver's edited arguments are checked against it
