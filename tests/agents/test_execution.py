"""Executing runs for callers other than HTTP: keyword arguments, queued runs, org context."""

from __future__ import annotations

import json

import pytest

from runs.background import run_execute_queued, run_submit
from agents.execution import run_execute
from agents.models import Agent
from runs.models import Run
from runs.lifecycle import run_start
from runs.request import RunRequest
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import RunKind, RunStatus
from billing.meter import InsufficientBalance
from billing.services import credit_add
from sessions.models import Session
from tenancy import stores
from tests.agents.conftest import debits, make_agent

pytestmark = pytest.mark.django_db


def test_run_execute_needs_the_agents_org_context(funded, upstream):
    make_agent(funded, "ctx")
    with funded.context():
        agent = Agent.objects.get(name="ctx")
    with pytest.raises(stores.NoOrgSelected):
        run_execute(agent=agent, input="x", actor="a/u")


def test_a_queued_run_is_executed_later_by_a_worker(funded, upstream):
    make_agent(funded, "bg")
    with funded.context():
        agent = Agent.objects.get(name="bg")
        queued, replayed = run_submit(agent=agent, input="later please", actor=f"{funded.slug}/worker", request_id="req_bg")
        assert (queued.status, queued.kind, replayed) == (RunStatus.QUEUED, RunKind.RUN, False) and not upstream.chat_requests

        assert run_execute_queued(run_id=queued.id) == RunStatus.OK

        done = Run.objects.get(pk=queued.id)
        assert (done.status, done.output, done.actor) == (RunStatus.OK, "ok", f"{funded.slug}/worker")
        assert upstream.chat_requests[0]["messages"] == [{"role": "user", "content": "later please"}]
        assert run_execute_queued(run_id=queued.id) == RunStatus.OK  # delivered twice: executed once
        assert Session.objects.get(pk=done.session_id).status == "done"
    assert len(upstream.chat_requests) == 1
    [debit] = debits(funded)
    assert (debit.run_id, debit.request_id, debit.amount_cents) == (queued.id, "req_bg", -100)


def test_a_queued_run_holds_its_fee_from_acceptance_and_starts_on_it(org_a, upstream, settings):
    settings.CLOUD_AGENT_FEE_CENTS = 100
    credit_add(org=org_a.org, cents=100)
    make_agent(org_a, "one-fee")
    with org_a.context():
        agent = Agent.objects.get(name="one-fee")
        first, _ = run_submit(agent=agent, input="x", actor=f"{org_a.slug}/u")
        assert first.fee_cents == 100
        with pytest.raises(InsufficientBalance):  # the queued run holds the only fee
            run_submit(agent=agent, input="y", actor=f"{org_a.slug}/u")
        assert Run.objects.count() == 1
        assert run_execute_queued(run_id=first.id) == RunStatus.OK
    assert [d.run_id for d in debits(org_a)] == [first.id]


def test_a_scheduled_run_the_gate_refuses_is_recorded_as_not_started(org_a, upstream):
    make_agent(org_a, "unpaid")
    with org_a.context():
        agent = Agent.objects.get(name="unpaid")
        run = run_start(RunRequest(kind=RunKind.SCHEDULED, agent=agent, input="", actor=f"scheduler:{org_a.slug}/unpaid", queued=True,
                                   title="scheduled run"))
        stored = Run.objects.get(pk=run.id)
        session = Session.objects.get(pk=stored.session_id)
    assert (stored.status, stored.kind, stored.fee_cents) == (RunStatus.ERROR, RunKind.SCHEDULED, 0)
    assert stored.error.startswith("not started: the org's balance")
    assert (session.status, session.title) == ("error", "scheduled run")
    assert upstream.chat_requests == []


def test_a_refused_background_run_raises_and_records_nothing(org_a, upstream):
    make_agent(org_a, "refused")
    with org_a.context():
        agent = Agent.objects.get(name="refused")
        with pytest.raises(InsufficientBalance):
            run_submit(agent=agent, input="x", actor=f"{org_a.slug}/u")
        assert (Run.objects.count(), Session.objects.count()) == (0, 0)


def test_an_oversized_input_is_refused_before_anything_is_recorded(org_a, upstream):
    make_agent(org_a, "q")
    with org_a.context(), pytest.raises(InvalidRequest, match="input too large"):
        run_submit(agent=Agent.objects.get(name="q"), input="x" * (128 * 1024 + 1), actor="a/u")
    with org_a.context():
        assert Run.objects.count() == 0


def test_a_tool_call_event_keeps_what_the_model_read_and_fits_an_event_when_escaping_would_not():
    """Issue 28: the event holds the whole result (up to the tools' 16 KiB and its notice) and the
    arguments, so a resumed run rebuilds its conversation; a payload whose JSON escaping would pass
    the event budget is cut to the 4 KiB previews instead of being refused (and lost)."""
    from toolkit.events import EVENT_BUDGET_BYTES, EVENT_PREVIEW_BYTES, tool_call_payload
    from sessions.fields import dump_payload
    from toolkit.invoke import MAX_RESULT_BYTES, cut

    result = cut("r" * (20 * 1024)) + " [masked: api key]"  # what the model read: 16 KiB, the notice, a mask's words
    plain = tool_call_payload(name="t", raw_arguments=json.dumps({"q": "x" * 20000}), result=result, failed=False, round_no=1,
                              call_id="call_1", run_id="run_1")
    assert plain["result"] == result and plain["arguments"] == {"q": "x" * 20000}
    assert len(result.encode()) > MAX_RESULT_BYTES
    dump_payload(plain)  # fits an event

    escaped = "\x01" * (15 * 1024)  # each control character becomes six bytes of JSON
    cut_down = tool_call_payload(name="t", raw_arguments="{}", result=escaped, failed=False, round_no=1, call_id="c", run_id="r")
    assert len(cut_down["result"].encode()) <= EVENT_PREVIEW_BYTES + 64
    assert len(dump_payload(cut_down).encode()) <= EVENT_BUDGET_BYTES
