from django.apps import AppConfig


class AgentsConfig(AppConfig):
    """Agent definitions (each org's own store); their runs are the `runs` app's."""

    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register this app's run kinds and code with the lower apps (`agents/wiring.py`)."""
        from agents import wiring  # ready(): the wiring's modules import models, loaded after apps.py

        wiring.wire()
