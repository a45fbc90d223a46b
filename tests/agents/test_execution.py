"""run_execute for callers other than HTTP: keyword arguments, queued runs, org context."""

from __future__ import annotations

import pytest

from agents.execution import RunNotQueued, run_execute, run_queue
from agents.models import Agent, Run
from agents_site.errors import InvalidRequest, NotFound
from agents_site.vocabulary import RunStatus
from billing.meter import InsufficientBalance
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
        queued = run_queue(agent=agent, input="later please", actor=f"{funded.slug}/worker", request_id="req_bg")
        assert queued.status == RunStatus.QUEUED and not upstream.chat_requests

        done = run_execute(agent=agent, run_id=queued.id, actor="")

        assert (done.id, done.status, done.output, done.actor) == (queued.id, RunStatus.OK, "ok", f"{funded.slug}/worker")
        assert upstream.chat_requests[0]["messages"] == [{"role": "user", "content": "later please"}]
        assert Run.objects.get(pk=queued.id).status == RunStatus.OK
        with pytest.raises(RunNotQueued):
            run_execute(agent=agent, run_id=queued.id, actor="x/y")
        with pytest.raises(NotFound):
            run_execute(agent=agent, run_id="run_missing", actor="x/y")
    [debit] = debits(funded)
    assert (debit.run_id, debit.request_id) == (queued.id, "req_bg")


def test_a_queued_run_the_gate_refuses_ends_as_an_error_without_executing(org_a, upstream):
    make_agent(org_a, "unpaid")
    with org_a.context():
        agent = Agent.objects.get(name="unpaid")
        queued = run_queue(agent=agent, input="x", actor=f"{org_a.slug}/u")
        with pytest.raises(InsufficientBalance):
            run_execute(agent=agent, run_id=queued.id, actor="")
        stored = Run.objects.get(pk=queued.id)
    assert stored.status == RunStatus.ERROR and stored.error.startswith("not started: the org's balance")
    assert upstream.chat_requests == []


def test_run_queue_refuses_oversized_input(org_a, upstream):
    make_agent(org_a, "q")
    with org_a.context(), pytest.raises(InvalidRequest, match="input too large"):
        run_queue(agent=Agent.objects.get(name="q"), input="x" * (128 * 1024 + 1), actor="a/u")
