"""One scheduler tick: decide every due slot of every long-running agent, exactly once.

Called every minute by the django-q2 schedule `agents: scheduler tick` (see
`manage.py ensure_schedules`), in any number of processes at once. For each org that has a
store (`tenancy.stores.existing_org_slugs`), inside `org_context(slug)`, each long-running
agent is decided in one transaction on the org store:

1. Settle the run in flight, if it finished: a success resets the failure streak; a failure
   (an `error` run, gate denials included) adds one and sets the backoff to skip the next
   `2^(n-1)` fireable slots, at most 60.
2. Walk the slots after the agent's cursor up to now (croniter in the agent's time zone). All
   but the newest are recorded `missed`. The newest is recorded `missed` when it is at least
   `AGENTS_CATCHUP_SECONDS` old (a scheduler that was down never floods), `busy` when a run
   is still in flight, `backoff` while the backoff lasts, and otherwise `fired`: a queued
   run with actor `scheduler:<org>/<agent>` is handed to the run path through `fire`.
3. Each decision is a `ScheduleSlot` row, unique per (agent, minute). The transaction holds
   the agent's state row locked (SQLite `BEGIN IMMEDIATE`, PostgreSQL `SELECT … FOR UPDATE`),
   so a second scheduler sees the advanced cursor; if it still reaches the same slot, the
   unique constraint refuses it and that scheduler does nothing for this agent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from croniter.croniter import CroniterError
from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from agents.models import Agent
from runs.models import Run
from agents.scheduling import slots as slot_math
from agents.scheduling.models import ScheduleSlot, ScheduleState
from agents_site.vocabulary import ExecutionMode, RunStatus, SlotOutcome
from tenancy import stores
from agents.inference import inference_configured
from agents.scheduling.fire import fire as default_fire

logger = logging.getLogger(__name__)

#: Slots older than this before a tick are not walked (a minutely cron: 2880 slots).
LOOKBACK = timedelta(days=2)

#: At most this many missed slots are recorded per agent and tick.
MAX_RECORDED_MISSED = 60


@dataclass
class Decision:
    """One slot decided by this tick: `(org, agent name, slot UTC, outcome, run id)`."""

    org: str
    agent: str
    slot_at: datetime
    outcome: str
    run_id: str = ""


@dataclass
class TickReport:
    """What one tick decided, and the orgs it could not process."""

    decisions: list[Decision] = field(default_factory=list)
    failed_orgs: list[str] = field(default_factory=list)

    def outcomes(self, outcome: str) -> list[Decision]:
        """Return the decisions with `outcome` (a `SlotOutcome`)."""
        return [d for d in self.decisions if d.outcome == outcome]


def scheduler_actor(org: str, agent: Agent) -> str:
    """Return the actor of a scheduled run: `scheduler:<org>/<agent name>` (reference §5)."""
    return f"scheduler:{org}/{agent.name}"


def schedule_key(agent: Agent) -> str:
    """Return `schedule|timezone`: the cursor is reset when either changes."""
    return f"{agent.schedule}|{agent.timezone or 'UTC'}"


def scheduler_tick(*, now: datetime | None = None, fire=None, catchup_seconds: int | None = None) -> TickReport:
    """Decide every due slot of every org's long-running agents; return what was decided.

    `now` (aware, default the clock) and `catchup_seconds` (default `AGENTS_CATCHUP_SECONDS`)
    are injectable for tests; `fire(agent=, slot_at=, actor=) -> Run` defaults to
    `agents.scheduling.fire.fire`. An org whose store fails is logged and skipped. Without
    inference configured (`INFERENCE_BASE_URL`) nothing is decided.
    """
    now = now or timezone.now()
    report = TickReport()
    if not inference_configured():
        # Like the reference, no scheduler without a model to call: nothing is decided, so
        # once inference is configured the catch-up rule applies to what was missed.
        return report
    for slug in stores.existing_org_slugs():
        try:
            with stores.org_context(slug, create=False):
                tick_org(org=slug, now=now, report=report, fire=fire, catchup_seconds=catchup_seconds)
        except Exception:  # one broken org never stops the others
            logger.exception("scheduler tick failed for org %s", slug)
            report.failed_orgs.append(slug)
    return report


def tick_org(*, org: str, now: datetime, report: TickReport | None = None, fire=None, catchup_seconds: int | None = None) -> TickReport:
    """Decide the due slots of the current org's long-running agents. Org context required."""
    report = report if report is not None else TickReport()
    if fire is None:
        fire = default_fire
    catchup = settings.AGENTS_CATCHUP_SECONDS if catchup_seconds is None else catchup_seconds
    agents = Agent.objects.filter(execution_mode=ExecutionMode.LONG_RUNNING).exclude(schedule="").order_by("name")
    for agent in agents:
        try:
            decide_agent(org=org, agent=agent, now=now, fire=fire, catchup_seconds=catchup, report=report)
        except IntegrityError:
            # Another scheduler decided this slot first; its decision stands.
            logger.info("slot of %s/%s already decided elsewhere", org, agent.name)
        except CroniterError as exc:
            logger.warning("agent %s/%s has an unusable schedule %r: %s", org, agent.name, agent.schedule, exc)
    return report


def _locked_state(agent: Agent, now: datetime) -> tuple[ScheduleState, bool]:
    """Return the agent's state row locked for this transaction, and whether it is new."""
    state = ScheduleState.objects.select_for_update().filter(agent=agent).first()
    if state is not None:
        return state, False
    state = ScheduleState.objects.create(agent=agent, updated_at=now)
    return state, True


def _settle(state: ScheduleState, now: datetime) -> None:
    """Apply the outcome of the run in flight once it has finished."""
    if not state.in_flight_run_id:
        return
    run = Run.objects.filter(pk=state.in_flight_run_id).only("status", "error", "finished_at").first()
    if run is not None and run.status not in RunStatus.FINISHED:
        return
    state.in_flight_run_id = ""
    if run is None:
        return
    state.last_outcome = run.status
    state.last_error = run.error if run.status == RunStatus.ERROR else ""
    state.last_finished_at = run.finished_at or now
    if run.status == RunStatus.OK:
        state.fail_streak = 0
        state.backoff_remaining = 0
    else:
        state.fail_streak += 1
        state.backoff_remaining = slot_math.backoff_slots(state.fail_streak)


def _cursor(agent: Agent, state: ScheduleState, now: datetime) -> datetime:
    """Return the instant after which slots are due for `agent` (and persist it on `state`).

    A new agent, or a new schedule or time zone, starts from the agent's `updated_at`: no slot
    from before the change is due. Nothing older than `LOOKBACK` is walked.
    """
    key = schedule_key(agent)
    if state.schedule_key != key or state.cursor_at is None:
        floor = agent.updated_at
        state.cursor_at = max(state.cursor_at, floor) if state.cursor_at else floor
        state.schedule_key = key
    return max(state.cursor_at, now - LOOKBACK)


def decide_agent(*, org: str, agent: Agent, now: datetime, fire, catchup_seconds: int, report: TickReport) -> None:
    """Decide the due slots of one agent in one transaction (see the module docstring).

    Raises `IntegrityError` when another scheduler decided one of these slots first (the whole
    decision is rolled back, so nothing is fired twice).
    """
    with stores.org_atomic():
        state, _ = _locked_state(agent, now)
        _settle(state, now)
        due = slot_math.slots_between(agent.schedule, agent.timezone, _cursor(agent, state, now), now, keep_last=MAX_RECORDED_MISSED + 1)
        decided: list[Decision] = []
        if due:
            *older, newest = due
            for slot_at in older:
                decided.append(_record(org, agent, slot_at, SlotOutcome.MISSED, now))
            if (now - newest).total_seconds() >= catchup_seconds:
                decided.append(_record(org, agent, newest, SlotOutcome.MISSED, now))
            elif state.in_flight_run_id:
                decided.append(_record(org, agent, newest, SlotOutcome.BUSY, now))
            elif state.backoff_remaining > 0:
                state.backoff_remaining -= 1
                decided.append(_record(org, agent, newest, SlotOutcome.BACKOFF, now))
            else:
                slot = _record(org, agent, newest, SlotOutcome.FIRED, now)
                run = fire(agent=agent, slot_at=newest, actor=scheduler_actor(org, agent))
                ScheduleSlot.objects.filter(agent=agent, slot_at=newest).update(run_id=run.id)
                slot.run_id = run.id
                state.in_flight_run_id = run.id
                state.last_run_id = run.id
                state.last_fired_at = now
                decided.append(slot)
            state.cursor_at = newest
        state.updated_at = now
        state.save()
    report.decisions.extend(decided)


def _record(org: str, agent: Agent, slot_at: datetime, outcome: str, now: datetime) -> Decision:
    """Insert the slot's unique row (raises `IntegrityError` if it was already decided)."""
    with stores.org_atomic():
        ScheduleSlot.objects.create(agent=agent, slot_at=slot_at, outcome=outcome, decided_at=now)
    return Decision(org=org, agent=agent.name, slot_at=slot_at, outcome=str(outcome))
