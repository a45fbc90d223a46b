"""The scheduler tick against real org stores, with an injected clock (issue 6: cron agents)."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest
from django.db import connections
from django_q.models import OrmQ

from agents.models import Agent
from runs.models import Run
from agents.scheduling.models import ScheduleSlot, ScheduleState
from runs.models import RunTask
from agents.scheduling.ticker import scheduler_tick, tick_org
from agents_site.vocabulary import RunStatus, SlotOutcome
from tests.agents.conftest import utc

T0 = utc(2026, 1, 10, 12, 30)


@pytest.fixture(autouse=True)
def inference(upstream, settings):
    """The scheduler runs only where a model can be called: wire the loopback upstream.

    Runs are free here: slots, not the balance gate, are under test (a refused scheduled run
    is tested in test_execution.py).
    """
    settings.CLOUD_AGENT_FEE_CENTS = 0
    return upstream


def _queued_tasks() -> list[dict]:
    return [q.task for q in OrmQ.objects.all() if q.task.get("func") == "runs.tasks.execute_run"]


def _slots(org, agent) -> list[tuple]:
    with org.context():
        return [(s.slot_at, s.outcome) for s in ScheduleSlot.objects.filter(agent_id=agent.pk).order_by("slot_at")]


def _runs(org) -> list[Run]:
    with org.context():
        return list(Run.objects.order_by("created_at"))


def _tick(org, at):
    with org.context():
        return tick_org(org=org.slug, now=at)


def _finish(org, run_id: str, status: str) -> None:
    """Record the end of a scheduled run as the run path does (status, error, finished_at)."""
    with org.context():
        Run.objects.filter(pk=run_id).update(status=status, error="upstream said no" if status == RunStatus.ERROR else "", finished_at=T0)


def test_every_five_minutes_fires_at_1235_once_and_not_at_1236(org_a, scheduled_agent):
    agent = scheduled_agent(org_a, schedule="*/5 * * * *", at=T0)

    fired = scheduler_tick(now=utc(2026, 1, 10, 12, 35, 2))
    later = scheduler_tick(now=utc(2026, 1, 10, 12, 36, 1))

    assert [(d.org, d.agent, d.slot_at, d.outcome) for d in fired.decisions] == [(org_a.slug, "cron", utc(2026, 1, 10, 12, 35), "fired")]
    assert later.decisions == []
    runs = _runs(org_a)
    assert len(runs) == 1
    run = runs[0]
    assert (run.status, run.input, run.actor, run.agent_name) == (RunStatus.QUEUED, "", f"scheduler:{org_a.slug}/cron", "cron")
    assert _slots(org_a, agent) == [(utc(2026, 1, 10, 12, 35), SlotOutcome.FIRED)]
    with org_a.context():
        assert ScheduleSlot.objects.get().run_id == run.id
        assert RunTask.objects.get(run_id=run.id).task_id
    assert [(t["args"], t["name"]) for t in _queued_tasks()] == [((org_a.slug, run.id), run.id)]


def test_the_same_tick_twice_fires_one_run(org_a, scheduled_agent):
    scheduled_agent(org_a, schedule="*/5 * * * *", at=T0)
    at = utc(2026, 1, 10, 12, 35, 5)

    first = _tick(org_a, at)
    second = _tick(org_a, at)

    assert len(first.outcomes(SlotOutcome.FIRED)) == 1 and second.decisions == []
    assert len(_runs(org_a)) == 1 and len(_queued_tasks()) == 1


def _tick_concurrently(at, n: int = 2) -> list:
    """Run `n` scheduler ticks for instant `at` at once, each on its own connections."""
    barrier = threading.Barrier(n)
    reports, errors = [], []

    def scheduler_process():
        try:
            barrier.wait(timeout=10)
            reports.append(scheduler_tick(now=at))
        except Exception as exc:  # surfaced by the assertion below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=scheduler_process) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert errors == []
    return reports


@pytest.mark.django_db(transaction=True)
def test_two_scheduler_ticks_at_once_fire_one_run(make_org, scheduled_agent):
    org = make_org("two")
    agent = scheduled_agent(org, schedule="*/5 * * * *", at=T0)

    reports = _tick_concurrently(utc(2026, 1, 10, 12, 35, 1))

    assert sorted(len(r.outcomes(SlotOutcome.FIRED)) for r in reports) == [0, 1]
    assert len(_runs(org)) == 1
    assert _slots(org, agent) == [(utc(2026, 1, 10, 12, 35), SlotOutcome.FIRED)]
    assert len(_queued_tasks()) == 1


@pytest.mark.django_db(transaction=True)
def test_three_scheduler_ticks_at_once_on_postgresql_fire_one_run_per_slot(postgres_orgs, make_org, scheduled_agent):
    org = make_org("pgtick")
    postgres_orgs.append(org.slug)
    agent = scheduled_agent(org, schedule="*/5 * * * *", at=T0)

    first = _tick_concurrently(utc(2026, 1, 10, 12, 35, 1), n=3)  # the state row does not exist yet
    second = _tick_concurrently(utc(2026, 1, 10, 12, 40, 1), n=3)  # now they queue on its row lock

    assert sorted(len(r.outcomes(SlotOutcome.FIRED)) for r in first) == [0, 0, 1]
    assert sum(len(r.decisions) for r in second) == 1  # 12:40 decided once (busy: 12:35 still queued)
    assert _slots(org, agent) == [(utc(2026, 1, 10, 12, 35), SlotOutcome.FIRED), (utc(2026, 1, 10, 12, 40), SlotOutcome.BUSY)]
    assert len(_runs(org)) == 1


def test_backoff_skips_exactly_the_stated_slots_and_a_success_resets_it(org_a, scheduled_agent):
    agent = scheduled_agent(org_a, schedule="* * * * *", at=T0)
    outcomes = []
    plan = {0: RunStatus.ERROR, 2: RunStatus.ERROR, 5: RunStatus.ERROR, 10: RunStatus.OK, 11: RunStatus.OK}
    for minute in range(1, 13):
        report = _tick(org_a, T0 + timedelta(minutes=minute, seconds=3))
        (decision,) = report.decisions
        outcomes.append(decision.outcome)
        if decision.outcome == SlotOutcome.FIRED:
            _finish(org_a, decision.run_id, plan[minute - 1])

    # Failure 1 skips 1 slot, failure 2 skips 2, failure 3 skips 4; the success resets.
    assert outcomes == [
        "fired", "backoff",
        "fired", "backoff", "backoff",
        "fired", "backoff", "backoff", "backoff", "backoff",
        "fired", "fired",
    ]
    with org_a.context():
        state = ScheduleState.objects.get(agent_id=agent.pk)
    assert (state.fail_streak, state.backoff_remaining, state.last_outcome) == (0, 0, RunStatus.OK)


def test_a_run_still_in_flight_makes_the_next_slot_busy(org_a, scheduled_agent):
    agent = scheduled_agent(org_a, schedule="* * * * *", at=T0)

    _tick(org_a, T0 + timedelta(minutes=1, seconds=1))
    busy = _tick(org_a, T0 + timedelta(minutes=2, seconds=1))
    (run,) = _runs(org_a)
    _finish(org_a, run.id, RunStatus.OK)
    again = _tick(org_a, T0 + timedelta(minutes=3, seconds=1))

    assert [d.outcome for d in busy.decisions] == ["busy"]
    assert [d.outcome for d in again.decisions] == ["fired"]
    assert len(_runs(org_a)) == 2
    assert [o for _, o in _slots(org_a, agent)] == ["fired", "busy", "fired"]


def test_a_missed_slot_younger_than_catchup_fires_once_and_older_ones_are_skipped(org_a, scheduled_agent):
    agent = scheduled_agent(org_a, schedule="* * * * *", at=T0)

    # Nothing ticked from 12:30 to 12:34:50; the newest slot (12:34) is 50 s old.
    report = _tick(org_a, utc(2026, 1, 10, 12, 34, 50))

    assert [(d.slot_at.minute, d.outcome) for d in report.decisions] == [(31, "missed"), (32, "missed"), (33, "missed"), (34, "fired")]
    assert len(_runs(org_a)) == 1
    assert len(_slots(org_a, agent)) == 4


def test_a_missed_slot_older_than_catchup_is_recorded_skipped_and_nothing_runs(org_a, scheduled_agent, settings):
    settings.AGENTS_CATCHUP_SECONDS = 300
    agent = scheduled_agent(org_a, schedule="0 * * * *", at=T0)

    # The 13:00 slot was missed; the scheduler comes back at 13:05:01, 301 s later.
    report = _tick(org_a, utc(2026, 1, 10, 13, 5, 1))

    assert [(d.slot_at, d.outcome) for d in report.decisions] == [(utc(2026, 1, 10, 13, 0), "missed")]
    assert _runs(org_a) == [] and _queued_tasks() == []
    assert _slots(org_a, agent) == [(utc(2026, 1, 10, 13, 0), SlotOutcome.MISSED)]


def test_a_long_outage_records_a_bounded_number_of_missed_slots(org_a, scheduled_agent):
    agent = scheduled_agent(org_a, schedule="* * * * *", at=T0)

    report = _tick(org_a, T0 + timedelta(days=3))

    assert len(report.decisions) == 61  # 60 missed slots recorded, then the due one fires
    assert report.decisions[-1].outcome == "fired"
    assert len(_runs(org_a)) == 1
    with org_a.context():
        assert ScheduleSlot.objects.filter(agent_id=agent.pk).count() == 61


def test_a_clock_stepped_back_never_fires_a_slot_again(org_a, scheduled_agent):
    scheduled_agent(org_a, schedule="*/5 * * * *", at=T0)

    _tick(org_a, utc(2026, 1, 10, 12, 35, 1))
    back = _tick(org_a, utc(2026, 1, 10, 12, 31, 0))
    again = _tick(org_a, utc(2026, 1, 10, 12, 35, 30))

    assert back.decisions == [] and again.decisions == []
    assert len(_runs(org_a)) == 1


def test_a_new_schedule_does_not_fire_slots_from_before_the_change(org_a, scheduled_agent):
    agent = scheduled_agent(org_a, schedule="0 * * * *", at=T0)
    _tick(org_a, utc(2026, 1, 10, 12, 31))
    with org_a.context():
        Agent.objects.filter(pk=agent.pk).update(schedule="*/5 * * * *", updated_at=utc(2026, 1, 10, 12, 36, 30))

    report = _tick(org_a, utc(2026, 1, 10, 12, 40, 2))

    # 12:35 matched the new cron but came before the change; 12:40 is the first slot.
    assert [(d.slot_at, d.outcome) for d in report.decisions] == [(utc(2026, 1, 10, 12, 40), "fired")]


def test_the_tick_walks_slots_in_the_agents_time_zone(org_a, scheduled_agent):
    scheduled_agent(org_a, name="nightly", schedule="0 0 * * *", tz="America/Los_Angeles", at=utc(2026, 1, 10, 9, 0))

    assert _tick(org_a, utc(2026, 1, 11, 0, 0, 5)).decisions == []  # midnight UTC: not this agent's
    fired = _tick(org_a, utc(2026, 1, 11, 8, 0, 5))

    assert [(d.slot_at, d.outcome) for d in fired.decisions] == [(utc(2026, 1, 11, 8, 0), "fired")]


@pytest.mark.parametrize(
    ("schedule", "start", "end", "expected"),
    [
        ("30 2 * * *", utc(2026, 3, 8, 9, 0), utc(2026, 3, 8, 12, 0), [utc(2026, 3, 8, 10, 0)]),  # spring forward
        ("30 1 * * *", utc(2026, 11, 1, 7, 0), utc(2026, 11, 1, 11, 0), [utc(2026, 11, 1, 8, 30)]),  # fall back
    ],
)
def test_ticking_every_minute_through_a_dst_change_fires_once(org_a, scheduled_agent, schedule, start, end, expected):
    scheduled_agent(org_a, schedule=schedule, tz="America/Los_Angeles", at=start)
    fired = []
    at = start
    while at < end:
        at += timedelta(minutes=1)
        report = _tick(org_a, at + timedelta(seconds=2))
        for d in report.outcomes(SlotOutcome.FIRED):
            fired.append(d.slot_at)
            _finish(org_a, d.run_id, RunStatus.OK)

    assert fired == expected
    assert len(_runs(org_a)) == 1


def test_one_shot_agents_and_other_orgs_are_not_fired(org_a, org_b, scheduled_agent):
    scheduled_agent(org_a, schedule="*/5 * * * *", at=T0)
    with org_b.context():
        from agents.services import AgentInput, agent_create

        agent_create(data=AgentInput(name="manual", execution_mode="one-shot", schedule="*/5 * * * *"))

    report = scheduler_tick(now=utc(2026, 1, 10, 12, 35, 1))

    assert [(d.org, d.agent) for d in report.decisions] == [(org_a.slug, "cron")]
    assert _runs(org_b) == []


def test_deleting_an_agent_removes_its_schedule_records(org_a, scheduled_agent):
    agent = scheduled_agent(org_a, schedule="*/5 * * * *", at=T0)
    _tick(org_a, utc(2026, 1, 10, 12, 35, 1))

    from agents.services import agent_delete

    with org_a.context():
        agent_delete(ref="cron")
        assert (ScheduleSlot.objects.filter(agent_id=agent.pk).count(), ScheduleState.objects.filter(agent_id=agent.pk).count(), RunTask.objects.count()) == (0, 0, 0)


def test_without_inference_configured_the_scheduler_decides_nothing(org_a, scheduled_agent, settings):
    scheduled_agent(org_a, schedule="*/5 * * * *", at=T0)
    settings.INFERENCE_BASE_URL = ""

    report = scheduler_tick(now=utc(2026, 1, 10, 12, 35, 1))

    assert report.decisions == []
    assert _runs(org_a) == [] and _queued_tasks() == []
