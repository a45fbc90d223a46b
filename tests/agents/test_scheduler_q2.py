"""The django-q2 wiring: `manage.py ensure_schedules` and the task entry points."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_q.models import OrmQ, Schedule

from agents import tasks
from runs.models import Run
from agents_site.vocabulary import RunStatus


@pytest.fixture(autouse=True)
def inference(upstream, settings):
    """The scheduler runs only where a model can be called: wire the loopback upstream.

    Runs are free here: slots, not the balance gate, are under test (a refused scheduled run
    is tested in test_execution.py).
    """
    settings.CLOUD_AGENT_FEE_CENTS = 0
    return upstream


def _ensure() -> str:
    out = StringIO()
    call_command("ensure_schedules", stdout=out)
    return out.getvalue()


def test_ensure_schedules_creates_the_minute_tick_and_sweep_once(db):
    first = _ensure()
    second = _ensure()

    rows = {s.name: (s.func, s.schedule_type, s.cron, s.repeats) for s in Schedule.objects.all()}
    assert rows == {
        "agents: scheduler tick": ("agents.tasks.scheduler_tick", Schedule.CRON, "* * * * *", -1),
        "agents: sweep": ("runs.tasks.sweep", Schedule.CRON, "* * * * *", -1),
        # declared by the identity app (identity.tasks.SCHEDULES)
        "identity: health probes": ("identity.tasks.health_probes", Schedule.CRON, "*/5 * * * *", -1),
        "identity: retention": ("identity.tasks.retention", Schedule.CRON, "17 * * * *", -1),
        # declared by the webhooks app (webhooks.tasks.SCHEDULES: the one delivery engine)
        "webhooks: deliveries": ("webhooks.tasks.due_tick", Schedule.CRON, "* * * * *", -1),
        "webhooks: target sweep": ("webhooks.tasks.target_sweep", Schedule.CRON, "* * * * *", -1),
    }
    assert "agents: scheduler tick: created" in first and "agents: sweep: created" in first
    assert "agents: scheduler tick: unchanged" in second and "agents: sweep: unchanged" in second
    next_run = Schedule.objects.get(name="agents: scheduler tick").next_run
    assert next_run.second == 0 and next_run.microsecond == 0  # on a minute boundary


def test_ensure_schedules_repairs_a_changed_schedule_and_drops_duplicates(db):
    Schedule.objects.create(name="agents: scheduler tick", func="old.module.tick", schedule_type=Schedule.MINUTES, minutes=5)
    Schedule.objects.create(name="agents: scheduler tick", func="old.module.tick", schedule_type=Schedule.MINUTES, minutes=5)

    out = _ensure()

    assert "agents: scheduler tick: updated" in out
    (tick,) = Schedule.objects.filter(name="agents: scheduler tick")
    assert (tick.func, tick.schedule_type, tick.cron) == ("agents.tasks.scheduler_tick", Schedule.CRON, "* * * * *")


def test_the_tick_task_fires_due_agents_and_reports_counts(org_a, scheduled_agent):
    # The task uses the real clock: an agent saved two minutes ago with a minutely cron is due.
    scheduled_agent(org_a, schedule="* * * * *", at=timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=2))

    counts = tasks.scheduler_tick()

    assert counts["fired"] == 1 and counts["failedOrgs"] == 0
    with org_a.context():
        (run,) = Run.objects.all()
    assert run.status == RunStatus.QUEUED
    assert [q.task["args"] for q in OrmQ.objects.all()] == [(org_a.slug, run.id)]


def test_the_sweep_task_reports_what_it_recovered(db):
    assert tasks.sweep() == {"lost": 0, "redispatched": 0, "neverStarted": 0, "reaped": 0, "routedExpired": 0,
                             "approvalsExpired": 0, "charged": 0}
