from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Conversations (each org's own store): POST /v1/agents/chat, its presets and threads (spec 000 "The surface")."""

    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Let runs of lower layers post their result into a conversation (`agents.hooks`)."""
        from agents.hooks import register_conversation_replies
        from chat.services import conversation_exists, conversation_post_assistant

        register_conversation_replies(exists=conversation_exists, append=conversation_post_assistant)
