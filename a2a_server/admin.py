"""Admin for the acting org's public directory entries (read-only: listed and unlisted through the API)."""

from django.contrib import admin

from a2a_server.models import PublicCard
from tenancy.admin_site import OrgModelAdmin


@admin.register(PublicCard)
class PublicCardAdmin(OrgModelAdmin):
    list_display = ("agent_id", "listed_by", "listed_at")
    search_fields = ("agent_id", "listed_by")
    readonly_fields = [f.name for f in PublicCard._meta.fields]
