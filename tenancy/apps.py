from django.apps import AppConfig


class TenancyConfig(AppConfig):
    """Orgs, memberships, API keys, principals and the per-org stores."""

    name = "tenancy"
    verbose_name = "Org, members and keys"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Models are loaded only now: the API-key principal cache hears of every changed key, membership and user row.
        from tenancy import principal

        principal.connect_cache_signals()
