"""Admin for the acting org's machines, claim keys (hash only) and routed runs."""

from django.contrib import admin

from tenancy.admin_site import OrgModelAdmin
from targets.models import ClaimKey, RoutedRun, Target


@admin.register(Target)
class TargetAdmin(OrgModelAdmin):
    list_display = ("label", "id", "owner", "kind", "status", "host", "metrics_at", "created_at")
    list_filter = ("kind", "status")
    search_fields = ("label", "host", "owner", "id")


@admin.register(ClaimKey)
class ClaimKeyAdmin(OrgModelAdmin):
    """Claim keys show only the SHA-256 prefix of the key: the key itself is never stored."""

    list_display = ("target", "hash_prefix", "serving_at", "updated_at")
    fields = ("target", "hash_prefix", "serving_at", "updated_at")
    readonly_fields = fields

    @admin.display(description="SHA-256 (prefix)")
    def hash_prefix(self, obj: ClaimKey) -> str:
        return obj.key_hash[:12] + "…"


@admin.register(RoutedRun)
class RoutedRunAdmin(OrgModelAdmin):
    list_display = ("run_id", "target_id", "session_id", "state", "offered_at", "claimed_at", "reported_at", "withdrawn_at")
    list_filter = ("state",)
    search_fields = ("run_id", "target_id", "session_id")
