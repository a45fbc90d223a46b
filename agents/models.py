"""Agents and runs. Both live in the org's own store (routed by tenancy.db_router)."""

from django.db import models

from agents_site.vocabulary import AgentStatus, ExecutionMode, RunStatus


class Agent(models.Model):
    """An agent definition: a model, instructions (system prompt) and tool names.

    `id` is `agent_` + 32 hex; `name` is unique in the org and immutable.
    """

    id = models.CharField(primary_key=True, max_length=64)
    name = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=200, default="")
    instructions = models.TextField(default="", blank=True)
    description = models.TextField(default="", blank=True)
    tools = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=AgentStatus.choices, default=AgentStatus.READY)
    execution_mode = models.CharField(max_length=16, choices=ExecutionMode.choices, default=ExecutionMode.ONE_SHOT)
    schedule = models.CharField(max_length=200, default="", blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    compute_ref = models.CharField(max_length=256, default="", blank=True)
    service_account_id = models.CharField(max_length=256, default="", blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-updated_at", "name"]
        indexes = [models.Index(fields=["execution_mode", "schedule"], name="ix_agents_mode_schedule")]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    """One execution of an agent: input, output or error, model, tokens, duration.

    `finished_at` is set when the run ends (`ok`/`error`); history routes list only those.
    """

    id = models.CharField(primary_key=True, max_length=64)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs")
    agent_name = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=RunStatus.choices)
    model = models.CharField(max_length=200, default="", blank=True)
    input = models.TextField(default="", blank=True)
    output = models.TextField(default="", blank=True)
    error = models.TextField(default="", blank=True)
    duration_ms = models.IntegerField(default=0)
    attempts = models.IntegerField(default=0)
    prompt_tokens = models.IntegerField(null=True, blank=True)
    completion_tokens = models.IntegerField(null=True, blank=True)
    tool_calls = models.IntegerField(default=0)
    actor = models.CharField(max_length=300, default="", blank=True)
    trace_id = models.CharField(max_length=64, default="", blank=True)
    session_id = models.CharField(max_length=64, default="", blank=True)
    created_at = models.DateTimeField(db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["-finished_at", "-created_at"]
        indexes = [models.Index(fields=["agent", "finished_at"], name="ix_runs_agent_finished")]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"


# Scheduler and background-task records live in agents/scheduling/models.py (same app).
from agents.scheduling.models import RunTask, ScheduledAgent, ScheduleSlot, ScheduleState  # noqa: E402,F401
