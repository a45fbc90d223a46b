from django.apps import AppConfig


class ChatConfig(AppConfig):
    """Conversations (each org's own store): POST /v1/agents/chat, its presets and threads (spec 000 "The surface")."""

    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Let runs of lower layers post their result into a conversation (`runs.hooks`); register the `chat` run kind."""
        from runs.hooks import register_conversation_replies
        from chat.services import conversation_exists, conversation_post_assistant

        register_conversation_replies(exists=conversation_exists, append=conversation_post_assistant)

        from agents.execution.resume import run_resume
        from agents_site.vocabulary import RunKind
        from chat.rounds import round_resume_prompt, round_resumed
        from runs.policies import RunPolicy, register_run_policy

        # A round calls this deployment's gateway (a preset's fixed reply calls no model: its
        # request says so, and billing's fee for it is 0); a busy or unpaid round is refused. A
        # round waiting for approval resumes here on the prompt it opened with, and its reply is
        # posted to the conversation once it finishes.
        register_run_policy(RunPolicy(kind=RunKind.CHAT, resume=run_resume, resume_prompt=round_resume_prompt,
                                      resumed=round_resumed))
