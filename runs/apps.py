from django.apps import AppConfig


class RunsConfig(AppConfig):
    """The run machinery (each org's own store): runs, their tasks and approvals, the lifecycle,
    background workers, recovery, the reaper, shutdown, sweeps and streaming (issue 27 item 2)."""

    name = "runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Connect the worker-start hook and fill the sessions app's registries (`runs/wiring.py`)."""
        from runs import wiring  # ready(): the wiring's modules import models, loaded after apps.py

        wiring.wire()
