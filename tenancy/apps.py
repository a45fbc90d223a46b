from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Orgs, memberships, API keys, principals and the per-org stores."""

    name = "tenancy"
    verbose_name = "Org, members and keys"
    default_auto_field = "django.db.models.BigAutoField"
