from django.apps import AppConfig


class GuideConfig(AppConfig):
    """The system agent (spec 001 guided creation): it drives the chat preset `system`.

    No models. `ready()` registers the system agent as the handler of the `system` preset
    (chat never imports this app; this app reads identity and chat, one layer below it).
    """

    name = "guide"
    label = "guide"

    def ready(self) -> None:
        from chat.presets import register_preset_handler  # ready(): imports models, which load after apps.py
        from guide.system_agent import SYSTEM_PRESET, SystemAgent  # ready(): imports models, which load after apps.py

        register_preset_handler(SYSTEM_PRESET, SystemAgent())
