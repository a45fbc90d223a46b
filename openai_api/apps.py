from django.apps import AppConfig


class OpenaiApiConfig(AppConfig):
    """`/v1/agents/openai/v1/…`: the org's agents behind the OpenAI chat completions wire format."""

    name = "openai_api"
    verbose_name = "OpenAI-compatible endpoint"
