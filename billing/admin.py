"""Admin for the ledger: read-only, an org admin sees only the acting org's rows."""

from django.contrib import admin

from tenancy.admin_site import OrgRowsReadOnly
from billing.models import Account, LedgerEntry


OrgScopedReadOnly = OrgRowsReadOnly  # the ledger's rows name their org by foreign key


@admin.register(Account)
class AccountAdmin(OrgScopedReadOnly):
    list_display = ("org", "balance_cents", "updated_at")


@admin.register(LedgerEntry)
class LedgerEntryAdmin(OrgScopedReadOnly):
    list_display = ("created_at", "org", "kind", "amount_cents", "run_id", "model", "actor")
    list_filter = ("kind",)
    search_fields = ("run_id", "model", "actor")
