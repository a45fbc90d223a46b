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


def _run_statements(captured) -> list[str]:
    return [q["sql"].upper() for q in captured.captured_queries]


def test_run_finish_reads_the_run_once_and_returns_it_as_stored(org_a, upstream):
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann")
        with CaptureQueriesContext(connections[stores.current_alias()]) as queries:
            finished = run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.OK, output="done", model="m",
                                                                  prompt_tokens=3, completion_tokens=4, duration_ms=12))
        reads = [s for s in _run_statements(queries) if s.startswith("SELECT") and 'FROM "AGENTS_RUN"' in s]
        assert len(reads) == 1
        stored = Run.objects.get(pk=run.id)
        for name in ("status", "output", "error", "model", "prompt_tokens", "completion_tokens", "duration_ms",
                     "session_id", "input", "actor", "kind", "fee_cents", "started_at", "finished_at"):
            assert getattr(finished, name) == getattr(stored, name), name


def test_attaching_the_executor_reads_no_session_row_and_replays_earlier_commands(org_a, upstream):
    from agents.run_session import RunSession
    from sessions.control import control_send

    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann")
        control_send(session_id=run.session_id, command="message", message="before attach", actor=f"{org_a.slug}/ann")
        with CaptureQueriesContext(connections[stores.current_alias()]) as queries:
            session = RunSession.attach(session_id=run.session_id, actor=run.actor)
        try:
            statements = _run_statements(queries)
            assert not [s for s in statements if s.startswith("SELECT") and 'FROM "AGENT_SESSIONS_SESSION"' in s]
            assert len(statements) == 2  # the channel recorded, the backlog read
            assert Session.objects.get(pk=run.session_id).executor_channel
            commands = session.pending() + session.pending()
            assert [(c["command"], c["message"]) for c in commands] == [("message", "before attach")]
        finally:
            session.release()


def test_an_agent_is_found_by_name_in_one_query(org_a):
    from agents.selectors import agent_get

    make_agent(org_a, "by-name")
    with org_a.context():
        with CaptureQueriesContext(connections[stores.current_alias()]) as queries:
            agent = agent_get(ref="by-name")
        assert agent.name == "by-name" and len(queries.captured_queries) == 1
