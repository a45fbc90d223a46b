from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Orgs, memberships, API keys, principals and the per-org stores."""

    name = "tenancy"
    default_auto_field = "django.db.models.BigAutoField"
