from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """The HTML console (/console/) and the public build gallery (/builds/)."""

    name = "console"
    default_auto_field = "django.db.models.BigAutoField"
