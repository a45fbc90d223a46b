"""The Django admin for org admins and superusers.

An org admin logs in with their console credentials and sees the models of the org they act
for, read from that org's own store (the router follows the principal's org). A plain member
cannot log in. Org models are registered with `OrgModelAdmin`.
"""

from django import forms
from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm

from tenancy.models import Membership


def is_org_admin(request) -> bool:
    """Return True when the request's principal is an org admin acting for an org."""
    principal = getattr(request, "principal", None)
    return bool(principal and principal.org_slug and principal.is_org_admin)


def can_use_admin(user) -> bool:
    """Return True for an active superuser or an active admin of at least one org."""
    if not user.is_active:
        return False
    return user.is_superuser or Membership.objects.filter(user=user, is_admin=True).exists()


class OrgAdminAuthenticationForm(AdminAuthenticationForm):
    """Admin login that admits org admins and superusers (not Django's `is_staff` flag)."""

    def confirm_login_allowed(self, user):
        if not can_use_admin(user):
            raise forms.ValidationError(self.error_messages["invalid_login"], code="invalid_login", params={"username": self.username_field.verbose_name})


class AgentsAdminSite(admin.AdminSite):
    """Admin site whose permission is org-admin membership (or superuser)."""

    site_header = "Agents admin"
    site_title = "Agents admin"
    index_title = "Your org"
    login_form = OrgAdminAuthenticationForm

    def has_permission(self, request):
        user = request.user
        return bool(user.is_active and (user.is_superuser or is_org_admin(request)))


class OrgModelAdmin(admin.ModelAdmin):
    """A ModelAdmin for a model in the org's store: visible to the acting org's admins.

    Read-only by default (`editable = False`); the queryset is the current org's store, so an
    org admin never sees another org's rows.
    """

    editable = False

    def _allowed(self, request) -> bool:
        return is_org_admin(request)

    def has_module_permission(self, request):
        return self._allowed(request)

    def has_view_permission(self, request, obj=None):
        return self._allowed(request)

    def has_add_permission(self, request):
        return self.editable and self._allowed(request)

    def has_change_permission(self, request, obj=None):
        return self.editable and self._allowed(request)

    def has_delete_permission(self, request, obj=None):
        return self.editable and self._allowed(request)


class OrgRowsReadOnly(admin.ModelAdmin):
    """A read-only ModelAdmin of default-database rows that belong to an org (`org_lookup` names
    the org's slug: `org__slug` for a foreign key, `slug` for a slug column): a superuser sees
    every org's rows, an org admin the acting org's, nobody adds, changes or deletes."""

    org_lookup = "org__slug"

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
            return qs.filter(**{self.org_lookup: principal.org_slug})
        return qs if request.user.is_superuser else qs.none()
