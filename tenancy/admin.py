"""Admin for orgs and memberships (superusers) and API keys (hash only; org admins see their org's)."""

from django.contrib import admin

from tenancy.admin_site import OrgRowsReadOnly, is_org_admin

from tenancy.models import ApiKey, Membership, Org, OrgPlacement, OrgRestore, ReplicaGeneration
from tenancy.services import membership_remove, org_delete


class SuperuserOnly(admin.ModelAdmin):
    def has_module_permission(self, request):
        return request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser


@admin.register(Org)
class OrgAdmin(SuperuserOnly):
    """Orgs (superusers). Deleting one goes through `org_delete`: its open connections close."""

    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")

    def delete_model(self, request, obj):
        org_delete(org=obj)

    def delete_queryset(self, request, queryset):
        for org in queryset:
            org_delete(org=org)


@admin.register(Membership)
class MembershipAdmin(SuperuserOnly):
    list_display = ("user", "org", "is_admin")
    list_filter = ("is_admin",)
    search_fields = ("user__username", "org__slug")

    def delete_model(self, request, obj):
        membership_remove(org=obj.org, user_id=obj.user_id)  # keys revoked, connections closed

    def delete_queryset(self, request, queryset):
        for membership in queryset.select_related("org"):
            membership_remove(org=membership.org, user_id=membership.user_id)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    """API keys by prefix and SHA-256 only, with their limits (scope, allowed agents); read-only.

    An org admin sees the acting org's keys. Keys (and their limits, fixed for a key's life)
    are minted by the console's API keys page or `createapikey --scope --agent`.
    """

    list_display = ("prefix", "name", "user", "org", "scope", "allowed_agents", "created_at", "last_used_at", "revoked_at")
    list_filter = ("scope", "revoked_at")
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = ("prefix", "key_hash", "name", "user", "org", "scope", "allowed_agents", "created_at", "last_used_at",
                       "revoked_at")

    def _allowed(self, request) -> bool:
        return request.user.is_superuser or is_org_admin(request)

    def has_module_permission(self, request):
        return self._allowed(request)

    def has_view_permission(self, request, obj=None):
        return self._allowed(request)

    def has_add_permission(self, request):
        return False  # keys are minted by the console or `createapikey`, shown once

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        qs = super().get_queryset(request).select_related("user", "org")
        principal = getattr(request, "principal", None)
        if principal and principal.org_slug:
            return qs.filter(org__slug=principal.org_slug)
        return qs if request.user.is_superuser else qs.none()


@admin.register(OrgPlacement)
class OrgPlacementAdmin(SuperuserOnly):
    """Where each org's PostgreSQL database lives; read-only (recorded once, never moved by the site)."""

    list_display = ("slug", "server", "database", "created_at")
    list_filter = ("server",)
    search_fields = ("slug", "database")
    readonly_fields = ("slug", "server", "database", "created_at")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class _OwnOrgReadOnly(OrgRowsReadOnly):
    """Read-only rows keyed by `slug` (a replica outlives its org's row)."""

    org_lookup = "slug"


@admin.register(ReplicaGeneration)
class ReplicaGenerationAdmin(_OwnOrgReadOnly):
    """The org's backup (`manage.py backup_status` for one org): each replica generation, and for
    the current one its replica's lag and last snapshot, read live from the replica and Litestream."""

    list_display = ("slug", "name", "started_at", "ended_at", "end_reason", "replica_lag", "last_snapshot", "replica_url")
    list_filter = ("end_reason",)
    search_fields = ("slug",)
    readonly_fields = ("slug", "name", "replica_url", "started_at", "ended_at", "end_reason", "pruned_at", "replica_lag", "last_snapshot")

    def _status(self, obj):
        if obj.ended_at is not None:
            return None
        cache = self.__dict__.setdefault("_statuses", {})
        if obj.pk not in cache:
            from tenancy.backups.status import org_status

            cache[obj.pk] = org_status(obj.slug)
        return cache[obj.pk]

    def changelist_view(self, request, extra_context=None):
        self.__dict__["_statuses"] = {}  # read each org's replica once per page
        return super().changelist_view(request, extra_context)

    @admin.display(description="replica lag (s)")
    def replica_lag(self, obj):
        status = self._status(obj)
        if status is None:
            return "ended"
        return status.state if status.lag_seconds is None else f"{status.lag_seconds:.1f} ({status.state})"

    @admin.display(description="last snapshot")
    def last_snapshot(self, obj):
        status = self._status(obj)
        return "-" if status is None or status.last_snapshot is None else status.last_snapshot.strftime("%Y-%m-%d %H:%M:%S UTC")


@admin.register(OrgRestore)
class OrgRestoreAdmin(_OwnOrgReadOnly):
    """Every restore of an org's store (`manage.py restore_org`): moment, outcome, event positions."""

    list_display = ("slug", "moment", "status", "started_at", "finished_at", "restored_head", "position_floor", "error")
    list_filter = ("status",)
    search_fields = ("slug",)
    readonly_fields = ("slug", "moment", "status", "started_at", "finished_at", "restored_head", "position_floor", "error")
