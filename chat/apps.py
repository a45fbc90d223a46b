from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Conversations (each org's own store): POST /v1/agents/chat, its presets and threads (spec 000 "The surface")."""

    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"
