"""Scheduler records, in the org's own store (app `agents`).

- `ScheduleSlot`: one row per (agent, scheduled minute) the scheduler decided. Its unique
  constraint is what makes a slot fire exactly once across scheduler processes, restarts and
  clock steps: the second writer of a slot fails and does nothing.
- `ScheduleState`: per agent, the newest slot decided (cursor), the failure streak, the slots
  left to skip (backoff), the run in flight and the last outcome.

The durable task carrying one queued run (`RunTask`) is the runs app's (`runs.models`).
"""

from django.db import models

from agents_site.vocabulary import RunStatus, SlotOutcome


class ScheduleSlot(models.Model):
    """The decision for one scheduled minute of one agent: fired (with its run) or skipped."""

    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="schedule_slots")
    slot_at = models.DateTimeField(help_text="the scheduled minute, UTC")
    outcome = models.CharField(max_length=16, choices=SlotOutcome.choices)
    run_id = models.CharField(max_length=64, blank=True, default="")
    decided_at = models.DateTimeField()

    class Meta:
        ordering = ["-slot_at"]
        constraints = [models.UniqueConstraint(fields=["agent", "slot_at"], name="uniq_schedule_slot_per_agent_minute")]

    def __str__(self) -> str:
        return f"{self.agent_id} @ {self.slot_at:%Y-%m-%d %H:%M}Z: {self.outcome}"


class ScheduleState(models.Model):
    """What the scheduler remembers about one long-running agent between ticks."""

    agent = models.OneToOneField("agents.Agent", on_delete=models.CASCADE, primary_key=True, related_name="schedule_state")
    schedule_key = models.CharField(max_length=300, default="", help_text="schedule|timezone the cursor belongs to")
    cursor_at = models.DateTimeField(null=True, blank=True, help_text="newest slot decided, UTC")
    fail_streak = models.IntegerField(default=0)
    backoff_remaining = models.IntegerField(default=0, help_text="fireable slots still to skip")
    in_flight_run_id = models.CharField(max_length=64, blank=True, default="")
    last_run_id = models.CharField(max_length=64, blank=True, default="")
    last_outcome = models.CharField(max_length=16, choices=RunStatus.choices, blank=True, default="")
    last_error = models.TextField(blank=True, default="")
    last_fired_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"schedule state of {self.agent_id}"
