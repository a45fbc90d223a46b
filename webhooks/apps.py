from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    """Webhooks (issue 32): the one delivery engine (identity agents and org endpoints) and the
    org's webhook endpoints, events and per-request callbacks.

    Its models live in each org's store. It sits above agents, targets, sessions and billing and
    below identity, coding, chat and openai_api: the lower apps emit their events through the
    handlers `ready()` registers (`runs.hooks`), the higher ones call it directly.
    """

    name = "webhooks"
    label = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from webhooks import events  # ready(): imports models, which load after apps.py
        from webhooks.engine import register_channel  # ready(): imports models, which load after apps.py
        from webhooks.services import channel  # ready(): imports models, which load after apps.py

        register_channel(channel())
        events.register_handlers()
