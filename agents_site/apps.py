from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class AgentsSiteConfig(AppConfig):
    """The composition root: its management commands (an override of django-q2's `qcluster`) and system checks."""

    default = True
    name = "agents_site"

    def ready(self) -> None:
        """Register the platform's system checks (agents_site/checks.py)."""
        from agents_site import checks  # noqa: F401


class AgentsAdminConfig(admin_apps.AdminConfig):
    """The Django admin, served by `AgentsAdminSite` (org admins act for their org)."""

    default = False
    default_site = "tenancy.admin_site.AgentsAdminSite"
