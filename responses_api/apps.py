"""The OpenAI Responses API on every agent (issue 56): `/v1/agents/openai/v1/responses`."""

from django.apps import AppConfig


class ResponsesApiConfig(AppConfig):
    """`POST/GET/DELETE /v1/agents/openai/v1/responses…`: a response is a run of kind `responses`."""

    name = "responses_api"
    verbose_name = "OpenAI Responses API"

    def ready(self) -> None:
        """Register the rules of the `responses` runs this app starts (`runs.policies`): they call
        this deployment's gateway and answer a refusal with the error (the defaults); a background
        response is a queued run a worker executes (`services.response_execute_queued`). An agent
        with approval rules is refused at the start (a response cannot wait for a person), so the
        kind never resumes."""
        from agents_site.vocabulary import RunKind  # ready(): imports models, which load after apps.py
        from responses_api.services import response_execute_queued  # ready(): imports models, which load after apps.py
        from runs.policies import RunPolicy, register_run_policy  # ready(): imports models, which load after apps.py

        register_run_policy(RunPolicy(kind=RunKind.RESPONSES, execute_queued=response_execute_queued))
