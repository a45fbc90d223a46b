"""Admin for orgs, memberships and API keys (superusers; keys are shown by hash only)."""

from django.contrib import admin

from tenancy.models import ApiKey, Membership, Org


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
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")


@admin.register(Membership)
class MembershipAdmin(SuperuserOnly):
    list_display = ("user", "org", "is_admin")
    list_filter = ("is_admin",)
    search_fields = ("user__username", "org__slug")


@admin.register(ApiKey)
class ApiKeyAdmin(SuperuserOnly):
    list_display = ("prefix", "name", "user", "org", "created_at", "last_used_at", "revoked_at")
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = ("prefix", "key_hash", "created_at", "last_used_at")

    def has_add_permission(self, request):
        return False  # keys are minted by the console or `createapikey`, shown once
