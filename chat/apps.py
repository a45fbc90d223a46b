from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Conversations (each org's own store): POST /v1/agents/chat, its presets and threads (spec 000 "The surface")."""

    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the `chat` run kind and conversation replies with the lower apps (`chat/wiring.py`)."""
        from chat import wiring  # ready(): the wiring's modules import models, loaded after apps.py

        wiring.wire()
