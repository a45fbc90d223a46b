"""Admin for the acting org's stored responses and their kept stream events (read-only: written through the API)."""

from django.contrib import admin

from responses_api.models import ResponseEvent, StoredResponse
from tenancy.admin_site import OrgModelAdmin


@admin.register(StoredResponse)
class StoredResponseAdmin(OrgModelAdmin):
    list_display = ("id", "model", "conversation_id", "previous_response_id", "background", "created_at")
    search_fields = ("id", "model", "conversation_id")
    readonly_fields = [f.name for f in StoredResponse._meta.fields]


@admin.register(ResponseEvent)
class ResponseEventAdmin(OrgModelAdmin):
    list_display = ("response_id", "sequence_number", "type")
    search_fields = ("response_id",)
    readonly_fields = [f.name for f in ResponseEvent._meta.fields]
