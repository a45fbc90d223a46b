"""Scheduled runs through the one run path: gated and billed like any run (issue 6 item 2)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agents import tasks
from runs.models import Run
from agents.scheduling.models import ScheduleState
from agents.scheduling.ticker import tick_org
from agents_site.vocabulary import RunStatus, SessionStatus, SlotOutcome
from sessions.models import Session
from tests.agents.conftest import debits, fund, utc
from tests.support.upstream import Reply

pytestmark = pytest.mark.both_stores

T0 = utc(2026, 1, 10, 12, 30)


def _tick_and_execute(org, at) -> list:
    """Tick the org's scheduler at `at`, then execute every run it fired as a worker would."""
    with org.context():
        report = tick_org(org=org.slug, now=at)
    for decision in report.outcomes(SlotOutcome.FIRED):
        tasks.execute_run(org.slug, decision.run_id)
    return report.decisions


def test_an_unfunded_orgs_scheduled_run_never_calls_the_model(org_a, upstream, scheduled_agent):
    scheduled_agent(org_a, schedule="* * * * *", at=T0, model="test-model")

    (fired,) = _tick_and_execute(org_a, T0 + timedelta(minutes=1, seconds=2))
    (after,) = _tick_and_execute(org_a, T0 + timedelta(minutes=2, seconds=2))

    assert upstream.chat_requests == []
    assert debits(org_a) == []
    with org_a.context():
        run = Run.objects.get(pk=fired.run_id)
        state = ScheduleState.objects.get()
        session = Session.objects.get(pk=run.session_id)
    assert (run.status, run.error.startswith("not started: "), run.actor) == (RunStatus.ERROR, True, f"scheduler:{org_a.slug}/cron")
    assert session.status == SessionStatus.ERROR
    # A gate denial is a failed run: the next slot backs off.
    assert after.outcome == SlotOutcome.BACKOFF and (state.fail_streak, state.last_outcome) == (1, RunStatus.ERROR)


def test_a_scheduled_run_is_billed_to_its_org_with_the_scheduler_actor(org_a, upstream, scheduled_agent):
    fund(org_a, 1000)
    scheduled_agent(org_a, schedule="*/5 * * * *", at=T0, model="test-model")
    upstream.script(Reply(content="the time is now"))

    (fired,) = _tick_and_execute(org_a, utc(2026, 1, 10, 12, 35, 1))

    with org_a.context():
        run = Run.objects.get(pk=fired.run_id)
        session = Session.objects.get(pk=run.session_id)
    assert (run.status, run.output, run.input) == (RunStatus.OK, "the time is now", "")
    (debit,) = debits(org_a)
    assert (debit.run_id, debit.actor, debit.amount_cents) == (run.id, f"scheduler:{org_a.slug}/cron", -100)
    # No input: the prompt is the agent's instructions alone.
    assert [m["content"] for m in upstream.chat_requests[0]["messages"]] == ["Report the time."]
    assert (session.title, session.status, session.task_run_id) == ("scheduled run 2026-01-10T12:35:00Z", SessionStatus.DONE, run.id)


def test_failed_runs_back_off_and_a_success_resets_the_streak(org_a, upstream, scheduled_agent):
    fund(org_a, 10_000)
    scheduled_agent(org_a, schedule="* * * * *", at=T0, model="test-model")
    upstream.script(Reply(status=400), Reply(status=400))  # a 400 is never retried: one call, one error

    outcomes = [d.outcome for m in range(1, 8) for d in _tick_and_execute(org_a, T0 + timedelta(minutes=m, seconds=2))]

    assert outcomes == ["fired", "backoff", "fired", "backoff", "backoff", "fired", "fired"]
    with org_a.context():
        statuses = list(Run.objects.order_by("created_at").values_list("status", flat=True))
    assert statuses == ["error", "error", "ok", "ok"]
    assert len(debits(org_a)) == 2
