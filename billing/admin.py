"""Admin for the ledger: read-only, an org admin sees only the acting org's rows."""

from django.contrib import admin

from tenancy.admin_site import is_org_admin
from billing.models import Account, LedgerEntry


class OrgScopedReadOnly(admin.ModelAdmin):
    def has_module_permission(self, request):
        return request.user.is_superuser or is_org_admin(request)

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        principal = getattr(request, "principal", None)
        if principal and principal.org_slug:
            return qs.filter(org__slug=principal.org_slug)
        return qs if request.user.is_superuser else qs.none()


@admin.register(Account)
class AccountAdmin(OrgScopedReadOnly):
    list_display = ("org", "balance_cents", "updated_at")


@admin.register(LedgerEntry)
class LedgerEntryAdmin(OrgScopedReadOnly):
    list_display = ("created_at", "org", "kind", "amount_cents", "run_id", "model", "actor")
    list_filter = ("kind",)
    search_fields = ("run_id", "model", "actor")
