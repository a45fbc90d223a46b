from django.apps import AppConfig


class TargetsConfig(AppConfig):
    """Registered machines, claim keys and routed runs (each org's own store)."""

    name = "targets"
    default_auto_field = "django.db.models.BigAutoField"
