from django.apps import AppConfig


class A2aServerConfig(AppConfig):
    """`/v1/agents/{ref}/a2a`: every agent of the org as an A2A agent (agent card, JSON-RPC v1.0), and
    the org's public directory of cards."""

    name = "a2a_server"
    verbose_name = "A2A agent cards and JSON-RPC"

    def ready(self) -> None:
        """Register the rules of the `a2a` runs this app starts (`runs.policies`): an A2A task is a
        conversation round (`chat.rounds`) of kind `a2a`, so a task that waited for an approval
        resumes here exactly as a chat round does — rebuilt on the prompt it opened with, its reply
        posted to its conversation (the task's `contextId`) once it finished."""
        from agents.execution.resume import run_resume
        from agents_site.vocabulary import RunKind
        from chat.rounds import round_resume_prompt, round_resumed
        from runs.policies import RunPolicy, register_run_policy

        register_run_policy(RunPolicy(kind=RunKind.A2A, resume=run_resume, resume_prompt=round_resume_prompt,
                                      resumed=round_resumed))
