from django.apps import AppConfig


class IdentityConfig(AppConfig):
    """Agent identity (spec 001): identity agents, tokens, keys, relations, envelopes, deliveries.

    Its models live in each org's store. `ready()` registers the cascade delete with the agents
    layer (which never imports this app) and its deliveries' channel with the webhook engine; its
    django-q2 schedules are `identity.tasks.SCHEDULES`.
    """

    name = "identity"
    label = "identity"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from agents.hooks import register_agent_delete_handler  # ready(): imports models, which load after apps.py
        from identity import openapi  # noqa: F401  (registers the OpenAPI auth schemes)
        from identity.delivery import channel  # ready(): imports models, which load after apps.py
        from identity.services import identity_cascade_delete  # ready(): imports models, which load after apps.py
        from webhooks.engine import register_channel  # ready(): imports models, which load after apps.py

        register_channel(channel())

        register_agent_delete_handler(identity_cascade_delete)
