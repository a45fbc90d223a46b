from django.apps import AppConfig

from tenancy.signals import org_created  # a bare Signal: no model behind it


def _open_account(sender, org, **kwargs) -> None:
    """Open the account of an org the tenancy layer created (its balance starts at 0)."""
    from billing.services import account_for  # apps.py loads before models: imported when the signal fires

    account_for(org=org)


class BillingConfig(AppConfig):
    """Per-org balances and the ledger (default database)."""

    name = "billing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        org_created.connect(_open_account, dispatch_uid="billing.open_account")
