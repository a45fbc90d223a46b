"""Admin for the webhook models of the acting org (read from the org's own store).

Read-only: the API owns every rule (URL guard, events, secret shown once). Encrypted secrets
are never shown.
"""

from django.contrib import admin

from tenancy.admin_site import OrgModelAdmin
from webhooks.models import Endpoint, EventAttempt, EventDelivery, RunCallback, TargetStatusSeen


@admin.register(Endpoint)
class EndpointAdmin(OrgModelAdmin):
    list_display = ("public_id", "url", "enabled", "disabled_reason", "failing_since", "created_by", "created_at")
    list_filter = ("enabled", "disabled_reason")
    search_fields = ("public_id", "url", "description")
    exclude = ("secret_encrypted",)  # a secret: never shown


class EventAttemptInline(admin.TabularInline):
    model = EventAttempt
    extra = 0
    can_delete = False
    readonly_fields = ("number", "status_code", "error", "response_body", "duration_ms", "created_at")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(EventDelivery)
class EventDeliveryAdmin(OrgModelAdmin):
    list_display = ("public_id", "event_type", "endpoint", "status", "attempts", "last_status_code", "next_attempt_at", "created_at")
    list_filter = ("status", "event_type")
    search_fields = ("public_id", "event_id", "url")
    inlines = [EventAttemptInline]


@admin.register(RunCallback)
class RunCallbackAdmin(OrgModelAdmin):
    list_display = ("run_id", "endpoint", "url", "created_at")
    search_fields = ("run_id", "url")


@admin.register(TargetStatusSeen)
class TargetStatusSeenAdmin(OrgModelAdmin):
    list_display = ("target_id", "status", "changed_at")
    search_fields = ("target_id",)
