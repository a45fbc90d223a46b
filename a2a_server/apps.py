from django.apps import AppConfig


class A2aServerConfig(AppConfig):
    """`/v1/agents/{ref}/a2a`: every agent of the org as an A2A agent (agent card, JSON-RPC v1.0), and
    the org's public directory of cards."""

    name = "a2a_server"
    verbose_name = "A2A agent cards and JSON-RPC"

    def ready(self) -> None:
        """Register the `a2a` run kind (`a2a_server/wiring.py`)."""
        from a2a_server import wiring  # ready(): the wiring's modules import models, loaded after apps.py

        wiring.wire()
