from django.apps import AppConfig


class McpServerConfig(AppConfig):
    """`/v1/agents/mcp`: every agent of the org as a tool of one MCP server (streamable HTTP)."""

    name = "mcp_server"
    verbose_name = "MCP server"

    def ready(self) -> None:
        """Register the rules of the `mcp` runs this app starts (`runs.policies`): an MCP tool call
        is a conversation round (`chat.rounds`) of kind `mcp`, so a call that waited for an approval
        resumes here exactly as a chat round does — rebuilt on the prompt it opened with, its reply
        posted to its conversation once it finished."""
        from agents.execution.resume import run_resume  # ready(): imports models, which load after apps.py
        from agents_site.vocabulary import RunKind  # ready(): imports models, which load after apps.py
        from chat.rounds import round_resume_prompt, round_resumed  # ready(): imports models, which load after apps.py
        from runs.policies import RunPolicy, register_run_policy  # ready(): imports models, which load after apps.py

        register_run_policy(RunPolicy(kind=RunKind.MCP, resume=run_resume, resume_prompt=round_resume_prompt,
                                      resumed=round_resumed))
