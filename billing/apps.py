from django.apps import AppConfig


class BillingConfig(AppConfig):
    """Per-org balances and the ledger (default database)."""

    name = "billing"
    default_auto_field = "django.db.models.BigAutoField"
