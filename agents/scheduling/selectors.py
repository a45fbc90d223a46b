"""Reads of the scheduler's records (the admin's schedules view). Org context required."""

from __future__ import annotations

from datetime import datetime

from croniter.croniter import CroniterError
from django.utils import timezone

from agents.modes import next_fire_utc
from agents.models import Agent
from agents.scheduling.models import ScheduleSlot, ScheduleState
from agents_site.vocabulary import ExecutionMode


def scheduled_agents():
    """Return a queryset of the org's long-running agents with their state (one join)."""
    return (
        Agent.objects.filter(execution_mode=ExecutionMode.LONG_RUNNING)
        .exclude(schedule="")
        .select_related("schedule_state")
        .order_by("name")
    )


def schedule_state_of(agent: Agent) -> ScheduleState | None:
    """Return `agent`'s scheduler state, or None before its first tick."""
    try:
        return agent.schedule_state
    except ScheduleState.DoesNotExist:
        return None


def next_fire_of(agent: Agent, *, after: datetime | None = None) -> datetime | None:
    """Return `agent`'s next fire time in UTC by its cron and time zone, or None if unusable."""
    try:
        return next_fire_utc(agent.schedule, agent.timezone, after or timezone.now())
    except (CroniterError, ValueError):
        return None


def recent_slots(*, agent: Agent, limit: int = 50) -> list[ScheduleSlot]:
    """Return `agent`'s newest decided slots, newest first, at most `limit`."""
    return list(ScheduleSlot.objects.filter(agent=agent).order_by("-slot_at")[:limit])
