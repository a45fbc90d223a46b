from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    """Live sessions and their ordered event log (label `agent_sessions`: `sessions` is Django's)."""

    name = "sessions"
    label = "agent_sessions"
    default_auto_field = "django.db.models.BigAutoField"
