"""Admin for the runs of the acting org, their queue tasks and approvals (read from the org's own store)."""

from django.contrib import admin

from runs.models import Approval, Run, RunTask
from tenancy.admin_site import OrgModelAdmin


@admin.register(Approval)
class ApprovalAdmin(OrgModelAdmin):
    # Read-only: an answer goes through `runs.approvals` (who may answer, one execution).
    editable = False
    list_display = ("tool_name", "state", "decision", "run_id", "session_id", "needs_approval", "answered_by", "created_at")
    list_filter = ("state", "needs_approval")
    search_fields = ("run_id", "session_id", "tool_name", "tool_call_id")
    exclude = ("arguments",)  # unmasked (what the tool is given): shown masked by the API and the session log only


@admin.register(Run)
class RunAdmin(OrgModelAdmin):
    list_display = ("id", "agent_name", "status", "model", "duration_ms", "finished_at")
    list_filter = ("status",)
    search_fields = ("agent_name", "id")


@admin.register(RunTask)
class RunTaskAdmin(OrgModelAdmin):
    """The durable task of each queued run: task id, worker and lease (read-only)."""

    list_display = ("run", "task_id", "worker", "heartbeat_at", "enqueues", "enqueued_at")
    search_fields = ("run__id", "task_id")
