"""The run path's writes (issue 16 item 3): a run row is inserted once, with its session's id,
and the session's summary and end commit in the transaction that records the outcome."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from agents.models import Agent, Run
from agents.runs.lifecycle import Outcome, run_finish, run_start
from agents_site.vocabulary import RunKind, RunStatus
from sessions.models import Event, Session
from tenancy import stores
from tests.agents.conftest import fund, make_agent

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_start_inserts_the_run_once_with_its_session_id(org_a, upstream):
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        with CaptureQueriesContext(connections[stores.current_alias()]) as queries:
            run = run_start(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann")
        statements = [q["sql"].upper() for q in queries.captured_queries]
        assert not [s for s in statements if s.startswith("UPDATE") and '"AGENTS_RUN"' in s]
        assert sum(1 for s in statements if s.startswith("INSERT") and '"AGENTS_RUN"' in s) == 1
        assert Run.objects.get(pk=run.id).session_id == run.session_id != ""


def test_the_summary_and_the_end_of_the_session_commit_with_the_outcome(org_a, upstream):
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann")
        with pytest.raises(RuntimeError), stores.org_atomic():  # the caller's transaction rolls back: all of it does
            run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.OK, output="done", model="m"))
            raise RuntimeError("the caller failed after the finish")
        assert Run.objects.get(pk=run.id).status == RunStatus.RUNNING
        assert Session.objects.get(pk=run.session_id).status == "running"
        assert not Event.objects.filter(session_id=run.session_id, kind="log").exists()

        finished = run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.OK, output="done", model="m"))
        assert finished.status == RunStatus.OK
        assert Session.objects.get(pk=run.session_id).status == "done"
        summary = Event.objects.get(session_id=run.session_id, kind="log")
        assert f'"runId":"{run.id}"' in summary.payload.replace(" ", "")
