from django.apps import AppConfig


class CodingConfig(AppConfig):
    """Repositories and coding runs (each org's own store): POST /v1/agents/coding, /v1/agents/repos."""

    name = "coding"
    default_auto_field = "django.db.models.BigAutoField"
