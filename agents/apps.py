from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """Agent definitions and their runs (each org's own store)."""

    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"
