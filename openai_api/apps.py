from django.apps import AppConfig


class OpenaiApiConfig(AppConfig):
    """`/v1/agents/openai/v1/…`: the org's agents behind the OpenAI chat completions wire format."""

    name = "openai_api"
    verbose_name = "OpenAI-compatible endpoint"

    def ready(self) -> None:
        """Register the rules of the `openai` runs this app starts (`runs.policies`): they
        call this deployment's gateway and answer a refusal with the error."""
        from runs.policies import RunPolicy, register_run_policy  # ready(): imports models, which load after apps.py
        from agents_site.vocabulary import RunKind  # ready(): beside the policy it names (apps.py imports nothing at module level)

        register_run_policy(RunPolicy(kind=RunKind.OPENAI))
