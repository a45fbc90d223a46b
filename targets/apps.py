from django.apps import AppConfig


class TargetsConfig(AppConfig):
    """Registered machines, claim keys and routed runs (each org's own store)."""

    name = "targets"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Reach the lower layers' registries (`targets/wiring.py`)."""
        from targets import wiring  # ready(): the wiring's modules import models, loaded after apps.py

        wiring.wire()
