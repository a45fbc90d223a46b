from django.apps import AppConfig


class AgentSessionsConfig(AppConfig):
    """Live sessions and their ordered event log (label `agent_sessions`: `sessions` is Django's)."""

    name = "sessions"
    label = "agent_sessions"
    verbose_name = "Sessions"  # what the admin shows (the label would read "Agent_Sessions")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents_site.schemas import register_text_scanner  # ready(): imports models, which load after apps.py
        from sessions.restore_hooks import clock_head, clock_void_through  # ready(): imports models, which load after apps.py
        from sessions.services import refuse_secrets_in_fields  # ready(): imports models, which load after apps.py
        from sessions.storage_guard import install as install_storage_guard  # ready(): imports models, which load after apps.py
        from tenancy.backups.base import register_event_clock  # ready(): imports models, which load after apps.py

        register_event_clock(head=clock_head, void_through=clock_void_through)
        register_text_scanner(refuse_secrets_in_fields)
        install_storage_guard()  # every text and JSON column of every app's models (issue 49)
