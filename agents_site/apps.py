from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class AgentsSiteConfig(AppConfig):
    """The ground package as a Django app: its system checks and the `write_vocabulary_js` command."""

    default = True
    name = "agents_site"

    def ready(self) -> None:
        """Register the platform's system checks (agents_site/checks.py)."""
        from agents_site import checks  # noqa: F401  (system checks register themselves when imported, once apps are ready)


class AgentsAdminConfig(admin_apps.AdminConfig):
    """The Django admin, served by `AgentsAdminSite` (org admins act for their org)."""

    default = False
    default_site = "tenancy.admin_site.AgentsAdminSite"
