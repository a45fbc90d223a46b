"""Admin for agents and runs of the acting org (read from the org's own store)."""

from django.contrib import admin

from agents.models import Agent, McpServer, Run
from agents_site.admin_site import OrgModelAdmin


@admin.register(Agent)
class AgentAdmin(OrgModelAdmin):
    # Read-only: a ModelForm would write around `agents.services` (no name, cron, tool or cap
    # rules; an add without id or timestamps is a 500). Agents change through the API/console.
    editable = False
    list_display = ("name", "model", "execution_mode", "schedule", "timezone", "updated_at")
    list_filter = ("execution_mode", "status")
    search_fields = ("name", "description")
    readonly_fields = ("id", "created_at", "updated_at")


@admin.register(Run)
class RunAdmin(OrgModelAdmin):
    list_display = ("id", "agent_name", "status", "model", "duration_ms", "finished_at")
    list_filter = ("status",)
    search_fields = ("agent_name", "id")


@admin.register(McpServer)
class McpServerAdmin(OrgModelAdmin):
    """MCP servers of the acting org: registered and edited by org admins only."""

    editable = True
    list_display = ("name", "transport", "command", "url", "enabled", "updated_at")
    list_filter = ("transport", "enabled")
    search_fields = ("name", "command", "url")
    readonly_fields = ("id", "created_at", "updated_at")
