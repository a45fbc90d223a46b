"""The run path's writes (issue 16 item 3): a run row is inserted once, with its session's id,
and the session's summary and end commit in the transaction that records the outcome."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from agents.models import Agent
from runs.models import Run
from runs.lifecycle import Outcome, run_finish, run_start, run_starting
from runs.request import RunRequest
from agents_site.vocabulary import RunKind, RunStatus
from sessions.models import Event, Session
from tenancy import stores
from tests.agents.conftest import fund, make_agent
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_run_start_inserts_the_run_once_with_its_session_id(org_a, upstream):
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        with CaptureQueriesContext(connections[stores.current_alias()]) as queries:
            run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
        statements = [q["sql"].upper() for q in queries.captured_queries]
        assert not [s for s in statements if s.startswith("UPDATE") and '"AGENTS_RUN"' in s]
        assert sum(1 for s in statements if s.startswith("INSERT") and '"AGENTS_RUN"' in s) == 1
        assert Run.objects.get(pk=run.id).session_id == run.session_id != ""


def test_the_summary_and_the_end_of_the_session_commit_with_the_outcome(org_a, upstream):
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
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


def test_run_finish_records_the_outcome_in_one_statement_and_returns_the_run_as_stored(org_a, upstream):
    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
        with CaptureQueriesContext(connections[stores.current_alias()]) as queries:
            finished = run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.OK, output="done", model="m",
                                                                  prompt_tokens=3, completion_tokens=4, duration_ms=12))
        on_runs = [s for s in _run_statements(queries) if '"AGENTS_RUN"' in s]
        assert len(on_runs) == 1 and on_runs[0].startswith("UPDATE") and "RETURNING" in on_runs[0], on_runs  # no read
        stored = Run.objects.get(pk=run.id)
        for name in ("status", "output", "error", "model", "prompt_tokens", "completion_tokens", "duration_ms",
                     "session_id", "input", "actor", "kind", "fee_cents", "started_at", "finished_at"):
            assert getattr(finished, name) == getattr(stored, name), name


def test_attaching_the_executor_reads_no_session_row_and_replays_earlier_commands(org_a, upstream):
    from runs.run_session import RunSession
    from sessions.control import control_send

    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
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


def _writer(org):
    """Fund `org`, give it an agent `writer` and return it (inside `org.context()`)."""
    fund(org)
    make_agent(org, "writer")
    return Agent.objects.get(name="writer")


def test_a_finish_without_a_duration_counts_from_the_start_and_keeps_the_recorded_model(org_a, upstream):
    from datetime import timedelta

    with org_a.context():
        agent = _writer(org_a)
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
        started = Run.objects.get(pk=run.id).started_at
        Run.objects.filter(pk=run.id).update(started_at=started - timedelta(seconds=2))
        finished = run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.ERROR, error="cancelled", model=""))
        stored = Run.objects.get(pk=run.id)
        assert stored.model == run.model == finished.model != ""  # "" kept the model the run was recorded with
        assert 2000 <= stored.duration_ms < 60_000 and finished.duration_ms == stored.duration_ms


def test_a_finish_of_a_run_never_started_lasted_nothing(org_a, upstream):
    with org_a.context():
        agent = _writer(org_a)
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann", queued=True))
        finished = run_finish(run_id=run.id, outcome=Outcome.failed("cancelled before it started"))
        assert finished.duration_ms == 0 == Run.objects.get(pk=run.id).duration_ms


def test_a_second_finish_changes_nothing(org_a, upstream):
    with org_a.context():
        agent = _writer(org_a)
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
        assert run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.OK, output="first", model="m", duration_ms=5)) is not None
        assert run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.ERROR, error="second", duration_ms=9)) is None
        stored = Run.objects.get(pk=run.id)
        assert (stored.status, stored.output, stored.error, stored.duration_ms) == (RunStatus.OK, "first", "", 5)
        assert Event.objects.filter(session_id=run.session_id, kind="log").count() == 1


def test_a_run_executed_here_opens_its_session_with_the_input_and_its_executor(org_a, upstream):
    """`executor_here`: the session, its first turn and the executor's channel commit with the
    run; attaching then writes and reads nothing."""
    from runs.run_session import RunSession
    from sessions.control import executor_channel_for_new_session

    with org_a.context():
        agent = _writer(org_a)
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hello there", actor=f"{org_a.slug}/ann", executor_here=True))
        assert run.opened_here is True and run.session_root == run.session_id
        session_row = Session.objects.get(pk=run.session_id)
        assert session_row.executor_channel == executor_channel_for_new_session()
        turns = list(Event.objects.filter(session_id=run.session_id).values_list("seq", "kind", "payload"))
        assert len(turns) == 1 and turns[0][:2] == (1, "message") and '"role":"user"' in turns[0][2] and "hello there" in turns[0][2]
        with CaptureQueriesContext(connections[stores.current_alias()]) as queries:
            session = RunSession.attach(session_id=run.session_id, actor=run.actor, opened_here=True, root=run.session_root)
        assert queries.captured_queries == []
        session.close(status="done", summary={"runId": run.id})
        assert Session.objects.get(pk=run.session_id).executor_channel == ""


def test_a_queued_run_is_never_opened_with_an_executor(org_a, upstream):
    with org_a.context():
        agent = _writer(org_a)
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="later", actor=f"{org_a.slug}/ann", queued=True, executor_here=True))
        assert run.opened_here is False
        assert Session.objects.get(pk=run.session_id).executor_channel == ""
        assert not Event.objects.filter(session_id=run.session_id).exists()  # its worker records the input


def test_the_reply_and_the_summary_are_written_with_the_finish(org_a, upstream):
    """A sync run: the user's turn commits with the run's start, the reply and the summary with
    its finish, in order, with dense seqs; the session ends done with its channel cleared."""
    from agents.execution import run_execute

    upstream.script(Reply(content="the answer"))
    with org_a.context():
        agent = _writer(org_a)
        run = run_execute(agent=agent, input="the question", actor=f"{org_a.slug}/ann")
        assert run.status == RunStatus.OK
        events = list(Event.objects.filter(session_id=run.session_id).order_by("seq"))
        assert [(e.seq, e.kind) for e in events] == [(1, "message"), (2, "message"), (3, "log")]
        assert '"role":"user"' in events[0].payload and '"role":"assistant"' in events[1].payload
        assert events[1].position + 1 == events[2].position  # written together
        session_row = Session.objects.get(pk=run.session_id)
        assert session_row.status == "done" and session_row.executor_channel == "" and session_row.last_seq == 3


def test_a_command_sent_before_the_loop_attaches_is_acknowledged_and_held(org_a, upstream):
    """The inbox of a run executed here is registered before its session commits: a stop or a
    message sent the moment the session is visible is forwarded (acknowledged) and reaches the loop."""
    from runs.run_session import RunSession
    from sessions.control import control_send

    with org_a.context():
        agent = _writer(org_a)
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann", executor_here=True))
        _, forwarded = control_send(session_id=run.session_id, command="message", message="early", actor=f"{org_a.slug}/ann")
        assert forwarded is True
        session = RunSession.attach(session_id=run.session_id, actor=run.actor, opened_here=True, inbox=run.executor_inbox)
        assert [(c["command"], c["message"]) for c in session.pending()] == [("message", "early")]
        session.close(status="done", summary={"runId": run.id})


def test_a_run_start_that_fails_after_its_session_opened_leaves_no_inbox_behind(org_a, upstream):
    from sessions.control import executor_hub

    with org_a.context():
        agent = _writer(org_a)
        held = dict(executor_hub()._inboxes)
        with pytest.raises(RuntimeError, match="own write failed"):
            with run_starting(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann", executor_here=True)) as run:
                assert run.started_here and run.executor_inbox is not None
                raise RuntimeError("the caller's own write failed")
        assert not Session.objects.exists() and not Run.objects.exists()
    assert executor_hub()._inboxes == held  # the inbox registered for the rolled-back session is gone


@pytest.mark.parametrize(("outcome", "reason"), [
    (Outcome(status=RunStatus.ERROR, error="stopped by ann", model="m", finish_reason="stopped"), "stopped"),
    (Outcome(status=RunStatus.OK, output="cut", model="m", finish_reason="length"), "length"),
])
def test_the_summary_turn_carries_the_finish_reason(org_a, upstream, outcome, reason):
    # A session page reads it to show a user's stop as "stopped" rather than a failed session (issue 34).
    import json

    fund(org_a)
    make_agent(org_a, "writer")
    with org_a.context():
        run = run_start(RunRequest(kind=RunKind.RUN, agent=Agent.objects.get(name="writer"), input="hi", actor=f"{org_a.slug}/ann"))
        run_finish(run_id=run.id, outcome=outcome)
        summary = json.loads(Event.objects.get(session_id=run.session_id, kind="log").payload)
        assert summary["finishReason"] == reason == Run.objects.get(pk=run.id).finish_reason


@pytest.mark.both_stores
def test_a_stop_recorded_before_the_finish_commits_wins_over_an_ok_outcome(org_a, upstream):
    """Issue 25's race, made deterministic: the model's last reply completed (the executor holds an
    `ok` outcome) while a stop was recorded and had not reached it. The finish honours the stop:
    the run ends `error` "stopped by …: message" with `finishReason` `stopped`, keeps its reply,
    is not billed; a stop after the finish is refused (409) and changes nothing."""
    from agents_site.errors import ApiError
    from billing.models import LedgerEntry
    from sessions.control import control_send

    fund(org_a)
    make_agent(org_a, "writer")
    actor = f"{org_a.slug}/ann"
    with org_a.context():
        agent = Agent.objects.get(name="writer")
        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=actor))
        control_send(session_id=run.session_id, command="stop", message="wrong repo", actor=actor)
        finished = run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.OK, output="the whole reply", model="m"))
        assert (finished.status, finished.finish_reason, finished.error) == (RunStatus.ERROR, "stopped", f"stopped by {actor}: wrong repo")
        stored = Run.objects.get(pk=run.id)
        assert (stored.status, stored.finish_reason, stored.output) == (RunStatus.ERROR, "stopped", "the whole reply")
        assert Session.objects.get(pk=run.session_id).status == "error"
        summary = Event.objects.get(session_id=run.session_id, kind="log")
        assert '"status":"error"' in summary.payload.replace(" ", "")

        second = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="again", actor=actor))
        done = run_finish(run_id=second.id, outcome=Outcome(status=RunStatus.OK, output="done", model="m"))
        assert done.status == RunStatus.OK
        with pytest.raises(ApiError) as refused:
            control_send(session_id=second.session_id, command="stop", actor=actor)
        assert refused.value.status == 409
        assert Run.objects.get(pk=second.id).status == RunStatus.OK
    assert [e.run_id for e in LedgerEntry.objects.filter(org=org_a.org, kind="agent")] == [second.id]  # the stopped run: no debit
def test_a_stop_recorded_before_an_ok_finish_ends_the_run_stopped_and_unbilled(org_a, upstream, settings):
    """Issue 25's race, made deterministic: the stop is recorded (its executor never read it, as when
    it arrives while the last model reply completes) and the run then reports `ok` — the finish
    honours the recorded stop. A pause recorded on a run changes nothing."""
    import json

    from billing.models import LedgerEntry
    from sessions.control import control_send

    settings.CLOUD_AGENT_FEE_CENTS = 100
    with org_a.context():
        agent = _writer(org_a)
        earlier = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
        control_send(session_id=earlier.session_id, command="pause", actor=f"{org_a.slug}/bob")
        assert run_finish(run_id=earlier.id, outcome=Outcome(status=RunStatus.OK, output="done", model="m")).status == RunStatus.OK

        run = run_start(RunRequest(kind=RunKind.RUN, agent=agent, input="hi", actor=f"{org_a.slug}/ann"))
        event, forwarded = control_send(session_id=run.session_id, command="stop", message="wrong repo", actor=f"{org_a.slug}/bob")
        assert forwarded is False  # no executor took it: the run finishes as if it never saw the stop
        finished = run_finish(run_id=run.id, outcome=Outcome(status=RunStatus.OK, output="done", model="m"))
        stored = Run.objects.get(pk=run.id)
        for row in (finished, stored):
            assert (row.status, row.finish_reason, row.error, row.output) == (
                RunStatus.ERROR, "stopped", f"stopped by {org_a.slug}/bob: wrong repo", "done")
        assert Session.objects.get(pk=run.session_id).status == "error"
        summary = json.loads(Event.objects.filter(session_id=run.session_id, kind="log").order_by("-seq").first().payload)
        assert summary["status"] == "error" and summary["finishReason"] == "stopped"
        debited = set(LedgerEntry.objects.filter(kind="agent").values_list("run_id", flat=True))
        assert debited == {earlier.id}  # the ok run paid its fee; the stopped one did not
