"""Admin for the acting org's conversations and their turns (read-only: the API owns their rules)."""

from django.contrib import admin

from chat.models import Conversation, Message
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
