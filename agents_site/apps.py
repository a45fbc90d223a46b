from django.contrib.admin.apps import AdminConfig


class AgentsAdminConfig(AdminConfig):
    """The Django admin, served by `AgentsAdminSite` (org admins act for their org)."""

    default_site = "agents_site.admin_site.AgentsAdminSite"
