"""Admin for orgs (superusers), and members, invitations and API keys (org admins: their org's).

Every write goes through `tenancy.services`, with the console's rules and messages.
"""

from django import forms
from django.contrib import admin, messages
from django.urls import reverse
from django.utils import timezone

from agents_site.errors import ApiError
from tenancy.admin_site import OrgRowsReadOnly, is_org_admin
from tenancy.models import ApiKey, Invitation, Membership, Org, OrgPlacement, OrgRestore, ReplicaGeneration
from tenancy.services import (api_key_revoke, invitation_create, invitation_revoke, member_remove, membership_change_refusal,
                              membership_role_set, org_delete)
from tenancy.backups.status import org_status


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


def _acting_org(request) -> Org | None:
    principal = getattr(request, "principal", None)
    if principal and principal.org_slug:
        return Org.objects.filter(slug=principal.org_slug).first()
    return None


def _say(request, exc: ApiError) -> None:
    messages.error(request, exc.message[:1].upper() + exc.message[1:] + ".")


class _OrgScoped(admin.ModelAdmin):
    """Rows of the acting org for its admins (a superuser sees every org's)."""

    def _allowed(self, request) -> bool:
        return request.user.is_superuser or is_org_admin(request)

    def has_module_permission(self, request):
        return self._allowed(request)

    def has_view_permission(self, request, obj=None):
        return self._allowed(request)

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs
        if is_org_admin(request):
            return qs.filter(org__slug=request.principal.org_slug)
        return qs.none()


class MembershipForm(forms.ModelForm):
    """A membership's role, checked by the rule the console applies (an org keeps one admin)."""

    class Meta:
        model = Membership
        fields = ["user", "org", "is_admin"]

    def clean(self):
        data = super().clean()
        if self.instance.pk and "is_admin" in data:
            refusal = membership_change_refusal(membership=self.instance, is_admin=data["is_admin"])
            if refusal:
                raise forms.ValidationError(refusal[:1].upper() + refusal[1:] + ".")
        return data


@admin.register(Membership)
class MembershipAdmin(_OrgScoped):
    """Members of the acting org: change a role, remove a member (keys revoked, connections closed).

    Users are global: an existing user joins an org only by accepting an invitation, so org
    admins add no membership here (superusers, the site's operators, may). Removing a member
    never edits the user.
    """

    form = MembershipForm
    list_display = ("user", "org", "is_admin", "created_at")
    list_filter = ("is_admin",)
    search_fields = ("user__username", "org__slug")

    def get_readonly_fields(self, request, obj=None):
        return ("user", "org", "created_at") if obj is not None else ("created_at",)

    def has_add_permission(self, request):
        return request.user.is_superuser

    def has_change_permission(self, request, obj=None):
        return self._allowed(request)

    def has_delete_permission(self, request, obj=None):
        return self._allowed(request)

    def save_model(self, request, obj, form, change):
        if change:
            membership_role_set(org=obj.org, user_id=obj.user_id, is_admin=obj.is_admin)
        else:
            super().save_model(request, obj, form, change)

    def delete_model(self, request, obj):
        try:
            member_remove(org=obj.org, user_id=obj.user_id)  # keys revoked, connections closed
        except ApiError as exc:
            _say(request, exc)

    def delete_queryset(self, request, queryset):
        for membership in queryset.select_related("org"):
            self.delete_model(request, membership)


@admin.register(Invitation)
class InvitationAdmin(_OrgScoped):
    """Invitation links of the acting org: make one (its link shown once), withdraw pending ones.

    Made through `invitation_create` like the console's; the link is in the message after
    saving and nowhere else (only its SHA-256 is stored).
    """

    list_display = ("__str__", "note", "is_admin", "created_by", "created_at", "expires_at", "state_now", "accepted_by")
    list_filter = ("is_admin",)
    search_fields = ("note", "org__slug")
    actions = ["withdraw"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ("org", "is_admin", "note") if request.user.is_superuser else ("is_admin", "note")
        return ("org", "is_admin", "note", "created_by", "created_at", "expires_at", "accepted_at", "accepted_by", "revoked_at")

    def get_readonly_fields(self, request, obj=None):
        return self.get_fields(request, obj) if obj is not None else ()

    @admin.display(description="state")
    def state_now(self, obj):
        return obj.state(timezone.now())

    def has_add_permission(self, request):
        return self._allowed(request)

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        org = obj.org if request.user.is_superuser and obj.org_id else _acting_org(request)
        row, token = invitation_create(org=org, created_by=request.user, is_admin=obj.is_admin, note=obj.note)
        obj.pk, obj.org, obj.token_hash, obj.expires_at = row.pk, row.org, row.token_hash, row.expires_at
        link = request.build_absolute_uri(reverse("console:invite", kwargs={"token": token}))
        messages.warning(request, f"Invitation link (copy it now, it is not shown again): {link}")

    @admin.action(description="Withdraw the selected invitations")
    def withdraw(self, request, queryset):
        for row in queryset.select_related("org"):
            invitation_revoke(org=row.org, invitation_id=row.pk)
        messages.success(request, "Withdrawn: those links no longer work.")


@admin.register(ApiKey)
class ApiKeyAdmin(_OrgScoped):
    """API keys by prefix and SHA-256 only, with their limits (scope, allowed agents).

    An org admin sees the acting org's keys and may revoke them (the action; their open
    connections close). Keys (and their limits, fixed for a key's life) are minted by the
    console's API keys page or `createapikey --scope --agent`, shown once.
    """

    list_display = ("prefix", "name", "user", "org", "scope", "allowed_agents", "created_at", "last_used_at", "revoked_at")
    list_filter = ("scope", "revoked_at")
    search_fields = ("name", "prefix", "user__username")
    readonly_fields = ("prefix", "key_hash", "name", "user", "org", "scope", "allowed_agents", "created_at", "last_used_at",
                       "revoked_at")
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # keys are minted by the console or `createapikey`, shown once

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("user", "org")

    @admin.action(description="Revoke the selected API keys")
    def revoke(self, request, queryset):
        for row in queryset.select_related("org"):
            api_key_revoke(org=row.org, key_id=row.pk)
        messages.success(request, "Revoked: those keys no longer authenticate and their open connections are closed.")


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
