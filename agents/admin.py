"""Admin for the agents of the acting org (read from the org's own store); its runs' are `runs.admin`."""

from django.contrib import admin

from agents.models import Agent, McpServer
from agents.models import ScheduledAgent
from agents.scheduling.models import ScheduleSlot
from agents.scheduling.selectors import next_fire_of, recent_slots, schedule_state_of, scheduled_agents
from tenancy.admin_site import OrgModelAdmin
from agents_site.wire import rfc3339


@admin.register(Agent)
class AgentAdmin(OrgModelAdmin):
    # Read-only: a ModelForm would write around `agents.services` (no name, cron, tool or cap
    # rules; an add without id or timestamps is a 500). Agents change through the API/console.
    editable = False
    list_display = ("name", "model", "execution_mode", "schedule", "timezone", "approval_tools", "updated_at")
    list_filter = ("execution_mode", "status")
    search_fields = ("name", "description")
    readonly_fields = ("id", "created_at", "updated_at")

    @admin.display(description="asks before")
    def approval_tools(self, agent: Agent) -> str:
        """The tools whose calls wait for a person (the agent's `approval` rules)."""
        return ", ".join((agent.approval or {}).get("tools") or []) or "—"


@admin.register(McpServer)
class McpServerAdmin(OrgModelAdmin):
    """MCP servers of the acting org: registered and edited by org admins only."""

    editable = True
    list_display = ("name", "transport", "command", "url", "enabled", "updated_at")
    list_filter = ("transport", "enabled")
    search_fields = ("name", "command", "url")
    readonly_fields = ("id", "created_at", "updated_at")


@admin.register(ScheduledAgent)
class ScheduleAdmin(OrgModelAdmin):
    """Each long-running agent as a schedule: next fire time, last outcome, backoff state."""

    list_display = ("name", "schedule", "timezone", "next_fire", "last_outcome", "fail_streak", "backoff", "in_flight", "last_fired")
    search_fields = ("name",)
    readonly_fields = ("name", "schedule", "timezone", "next_fire", "last_outcome", "last_error", "fail_streak", "backoff", "in_flight", "last_fired", "recent_slots")
    fields = readonly_fields

    def get_queryset(self, request):
        return scheduled_agents()

    @admin.display(description="next fire (UTC)")
    def next_fire(self, obj):
        return rfc3339(next_fire_of(obj)) or "—"

    @admin.display(description="last outcome")
    def last_outcome(self, obj):
        state = schedule_state_of(obj)
        return (state.last_outcome if state else "") or "—"

    @admin.display(description="last error")
    def last_error(self, obj):
        state = schedule_state_of(obj)
        return (state.last_error if state else "") or "—"

    @admin.display(description="failure streak")
    def fail_streak(self, obj):
        state = schedule_state_of(obj)
        return state.fail_streak if state else 0

    @admin.display(description="backoff (slots to skip)")
    def backoff(self, obj):
        state = schedule_state_of(obj)
        return state.backoff_remaining if state else 0

    @admin.display(description="run in flight")
    def in_flight(self, obj):
        state = schedule_state_of(obj)
        return (state.in_flight_run_id if state else "") or "—"

    @admin.display(description="last fired (UTC)")
    def last_fired(self, obj):
        state = schedule_state_of(obj)
        return rfc3339(state.last_fired_at) if state and state.last_fired_at else "—"

    @admin.display(description="recent slots")
    def recent_slots(self, obj):
        rows = recent_slots(agent=obj, limit=20)
        return "\n".join(f"{rfc3339(s.slot_at)} {s.outcome} {s.run_id}".rstrip() for s in rows) or "—"


@admin.register(ScheduleSlot)
class ScheduleSlotAdmin(OrgModelAdmin):
    """Every slot the scheduler decided (read-only): fired with its run, or why it skipped."""

    list_display = ("agent", "slot_at", "outcome", "run_id", "decided_at")
    list_filter = ("outcome",)
    search_fields = ("agent__name", "run_id")
