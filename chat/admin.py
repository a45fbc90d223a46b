"""Admin for the acting org's conversations, their turns and share links (read-only: the API owns their rules)."""

from django.contrib import admin

from chat.models import Conversation, Message, ShareLink
from tenancy.admin_site import OrgModelAdmin


@admin.register(Conversation)
class ConversationAdmin(OrgModelAdmin):
    list_display = ("id", "title", "created_by", "busy_run_id", "turns", "updated_at")
    search_fields = ("id", "title", "created_by")
    readonly_fields = [f.name for f in Conversation._meta.fields]


@admin.register(Message)
class MessageAdmin(OrgModelAdmin):
    list_display = ("id", "conversation", "position", "__str__", "run_id", "created_at")
    list_filter = ("role",)
    search_fields = ("id", "conversation__id", "run_id")
    readonly_fields = [f.name for f in Message._meta.fields]


@admin.register(ShareLink)
class ShareLinkAdmin(OrgModelAdmin):
    """Share links (read-only: created and revoked through the API or the console; the token itself is
    never stored, only its SHA-256, which is not shown here either)."""

    list_display = ("id", "subject", "subject_id", "created_by", "created_at", "expires_at", "revoked_at")
    list_filter = ("subject",)
    search_fields = ("id", "subject_id", "created_by")
    exclude = ("token_hash",)
    readonly_fields = [f.name for f in ShareLink._meta.fields if f.name != "token_hash"]
