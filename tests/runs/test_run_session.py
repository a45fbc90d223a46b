"""A live session per run: opened at start, events as it goes, ended done/error, steerable.

Steering tests run the agent in this thread while another thread posts pause/resume/stop/
message to the session's control routes over HTTP, during a slow upstream completion; the
commands reach the running loop through the executor inbox and answer `forwarded: true`.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from django.test import Client

from runs.models import Run
from agents_site.vocabulary import RunStatus
from tests.agents.conftest import debits, make_agent, run, stored_runs
from tests.support.upstream import Reply
from tests.support.waiting import wait_until


def session(org, session_id: str) -> dict:
    response = org.client.get(f"/v1/agents/sessions/{session_id}")
    assert response.status_code == 200, response.content
    return response.json()


def events(org, session_id: str) -> list[dict]:
    """Every event of the session, oldest first (read from the org's store through the API)."""
    from sessions.models import Event

    with org.context():
        rows = list(Event.objects.filter(session_id=session_id).order_by("seq").values("seq", "kind", "actor", "payload"))
    for row in rows:
        row["payload"] = json.loads(row["payload"]) if row["payload"] else None
    return rows


def executor_channel(org, session_id: str) -> str:
    from sessions.models import Session

    with org.context():
        return Session.objects.values_list("executor_channel", flat=True).get(pk=session_id)


@pytest.mark.django_db
class TestRunSession:
    def test_a_run_opens_a_root_session_and_ends_it_done(self, funded, upstream):
        make_agent(funded, "scribe")
        body = run(funded, "scribe", "  Write the release notes for version 2.0 of the console " + "x" * 200).json()

        assert body["sessionId"]
        view = session(funded, body["sessionId"])
        assert view["agent"] == "scribe" and view["status"] == "done" and "parentSessionId" not in view
        assert view["rootSessionId"] == body["sessionId"] and view["actor"] == body["actor"]
        assert view["title"].startswith("Write the release notes") and len(view["title"].encode()) <= 120
        kinds = [(e["kind"], (e["payload"] or {}).get("role")) for e in events(funded, body["sessionId"])]
        assert kinds == [("message", "user"), ("message", "assistant"), ("log", None)]
        summary = events(funded, body["sessionId"])[-1]["payload"]
        assert summary["runId"] == body["id"] and summary["status"] == "ok" and summary["model"] == "test-model"
        wait_until(lambda: executor_channel(funded, body["sessionId"]) == "", what="the inbox to let go of the session")

    def test_a_failed_run_ends_its_session_error(self, funded, upstream):
        make_agent(funded, "broken")
        upstream.script(Reply(status=400))
        body = run(funded, "broken").json()
        assert session(funded, body["sessionId"])["status"] == "error"
        assert events(funded, body["sessionId"])[-1]["payload"]["error"] == body["error"]

    def test_a_two_round_tool_loop_records_two_tool_call_events(self, funded, upstream):
        make_agent(funded, "maths", tools=["calculator"])
        upstream.script(
            Reply(tool_calls=[("calculator", {"expression": "2+3"})]),
            Reply(tool_calls=[("calculator", {"expression": "5*4"})]),
            Reply(content="20"),
        )
        body = run(funded, "maths").json()
        calls = [e["payload"] for e in events(funded, body["sessionId"]) if e["kind"] == "tool-call"]
        assert [(c["name"], c["arguments"], c["result"], c["round"]) for c in calls] == [
            ("calculator", {"expression": "2+3"}, "5", 1),
            ("calculator", {"expression": "5*4"}, "20", 2),
        ]

    def test_an_agent_called_as_a_tool_runs_in_a_child_session(self, funded, upstream):
        make_agent(funded, "worker")
        make_agent(funded, "boss", tools=["agent_worker"])
        upstream.script(Reply(tool_calls=[("agent_worker", {"input": "do it"})]), Reply(content="done"), Reply(content="ok"))
        body = run(funded, "boss").json()
        worker = next(r for r in stored_runs(funded) if r.agent_name == "worker")
        child = session(funded, worker.session_id)
        assert child["parentSessionId"] == body["sessionId"] and child["rootSessionId"] == body["sessionId"]
        assert child["agent"] == "worker" and child["status"] == "done"
        assert [c["id"] for c in session(funded, body["sessionId"])["childSessions"]] == [worker.session_id]

    def test_a_session_bookkeeping_failure_never_fails_the_run(self, funded, upstream, monkeypatch):
        """An event the store refuses (injected fault on `message` turns) is logged and skipped; the run goes on."""
        from sessions import services as session_services

        real_check = session_services.check_turn

        def refusing(*, kind, **kwargs):
            if kind == "message":
                raise RuntimeError("injected: the session store refused the turn")
            return real_check(kind=kind, **kwargs)

        monkeypatch.setattr(session_services, "check_turn", refusing)  # every turn a run writes is checked here
        make_agent(funded, "leaky")
        response = run(funded, "leaky", "hello")
        assert response.status_code == 200 and response.json()["status"] == "ok"
        sid = response.json()["sessionId"]
        recorded = [(e["kind"], (e["payload"] or {}).get("role")) for e in events(funded, sid)]
        assert recorded == [("log", None)]  # both message turns were refused; the summary stands
        assert len(debits(funded)) == 1


def running_session(org, timeout: float = 10.0) -> str:
    """Wait until the org has a run in flight whose executor attached to its session; return the session id.

    The lifecycle opens the session with the run; the executor attaches its inbox just after.
    A command sent before that is recorded and drained by the executor (`forwarded: false`).
    """
    from sessions.models import Session
    from tenancy import stores

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with stores.org_context(org.slug):
            found = Run.objects.filter(status=RunStatus.RUNNING).exclude(session_id="").values_list("session_id", flat=True).first()
            attached = found and Session.objects.filter(pk=found).exclude(executor_channel="").exists()
        if attached:
            return found
        time.sleep(0.01)
    raise AssertionError("no run started")


class Steer(threading.Thread):
    """Another thread steering the running session over HTTP, with its own client and
    database connections; `script(sid, post)` does the steering, `answers` keeps each reply."""

    def __init__(self, org, script):
        super().__init__(daemon=True)
        self.org, self.script, self.answers, self.error = org, script, [], None

    def post(self, sid: str, command: str, **body) -> dict:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {self.org.key}")
        response = client.post(f"/v1/agents/sessions/{sid}/{command}", body, content_type="application/json")
        self.answers.append((command, response.status_code, response.json()))
        return response.json()

    def run(self):
        from django.db import connections

        try:
            self.script(running_session(self.org), self)
        except BaseException as exc:  # reported by the test
            self.error = exc
        finally:
            connections.close_all()

    def finish(self):
        self.join(15)
        assert not self.is_alive()
        if self.error:
            raise self.error


def session_status(org, sid: str) -> str:
    from sessions.models import Session
    from tenancy import stores

    with stores.org_context(org.slug):
        return Session.objects.values_list("status", flat=True).get(pk=sid)


@pytest.mark.django_db(transaction=True)
class TestSteering:
    def test_pause_holds_the_loop_until_resume(self, funded, upstream):
        make_agent(funded, "pausable", tools=["calculator"])
        slow = threading.Event()
        upstream.script(Reply(hold=slow, tool_calls=[("calculator", {"expression": "1+1"})]), Reply(content="resumed"))
        seen = {}

        def script(sid, steer):
            # While the first completion is in flight: posted earlier, the run's first
            # between-steps check took the pause before asking at all (0 calls while paused;
            # failed so beside a CPU hog).
            wait_until(lambda: upstream.chat_requests, what="the run to reach its first model call", timeout=10)
            steer.post(sid, "pause")
            slow.set()
            wait_until(lambda: session_status(funded, sid) == "paused", what="the session to pause", timeout=10)
            seen["status"] = session_status(funded, sid)
            # Not synchronisation: a window in which the paused loop must NOT take its next step
            # (an absence has no condition to wait on; a loop that ignored the pause would call
            # the model again well within it).
            time.sleep(0.3)
            seen["calls while paused"] = len(upstream.chat_requests)
            steer.post(sid, "resume")

        steer = Steer(funded, script)
        steer.start()
        response = run(funded, "pausable")
        steer.finish()

        assert response.status_code == 200 and response.json()["output"] == "resumed"
        assert [(c, code, a["forwarded"]) for c, code, a in steer.answers] == [("pause", 200, True), ("resume", 200, True)]
        assert seen == {"status": "paused", "calls while paused": 1}
        assert len(upstream.chat_requests) == 2
        sid = response.json()["sessionId"]
        logs = [e["payload"]["text"] for e in events(funded, sid) if e["kind"] == "log" and "text" in e["payload"]]
        assert logs == ["run paused", "run resumed"]
        assert session_status(funded, sid) == "done"

    def test_stop_ends_the_run_as_an_error_by_the_actor_with_its_message_as_the_reason(self, funded, upstream):
        make_agent(funded, "stoppable")
        slow = threading.Event()
        upstream.script(Reply(hold=slow, content="too late"))

        def script(sid, steer):
            steer.post(sid, "stop", message="enough")
            slow.set()

        steer = Steer(funded, script)
        steer.start()
        response = run(funded, "stoppable")
        steer.finish()

        assert steer.answers[0][:2] == ("stop", 200) and steer.answers[0][2]["forwarded"] is True
        assert response.status_code == 502
        body = response.json()
        # Spec 003: the stop's message is recorded as the cancellation reason.
        assert body["status"] == "error" and body["error"] == f"stopped by {funded.slug}/{funded.user.username}: enough"
        assert session_status(funded, body["sessionId"]) == "error"
        # The stop may reach the run before its model call starts (then none is made) or during it (cancelled).
        assert debits(funded) == [] and len(upstream.chat_requests) <= 1

    def test_stop_while_paused_ends_the_run(self, funded, upstream):
        make_agent(funded, "held")
        slow = threading.Event()
        upstream.script(Reply(hold=slow, content="never delivered"))

        def script(sid, steer):
            steer.post(sid, "pause")
            slow.set()
            wait_until(lambda: session_status(funded, sid) == "paused", what="the session to pause", timeout=10)
            steer.post(sid, "stop")

        steer = Steer(funded, script)
        steer.start()
        response = run(funded, "held")
        steer.finish()
        assert [a[2]["forwarded"] for a in steer.answers] == [True, True]
        assert response.status_code == 502 and response.json()["error"] == f"stopped by {funded.slug}/{funded.user.username}"
        logs = [e["payload"].get("text") for e in events(funded, response.json()["sessionId"]) if e["kind"] == "log"]
        assert "run paused" in logs and "run resumed" not in logs

    def test_message_becomes_a_user_turn_before_the_next_step(self, funded, upstream):
        make_agent(funded, "listener")
        slow = threading.Event()
        upstream.script(Reply(hold=slow, content="first answer"), Reply(content="second answer, bye"))

        def script(sid, steer):
            # Once the run is inside its first model call: posted earlier (the session exists
            # from run_start), the run's first between-steps check took it before asking at all.
            wait_until(lambda: upstream.chat_requests, what="the run to reach its first model call", timeout=10)
            steer.post(sid, "message", message="also say bye")
            slow.set()

        steer = Steer(funded, script)
        steer.start()
        response = run(funded, "listener", "hello")
        steer.finish()

        assert steer.answers[0][2]["forwarded"] is True and steer.answers[0][2]["command"] == "message"
        assert response.status_code == 200 and response.json()["output"] == "second answer, bye"
        assert upstream.chat_requests[1]["messages"][-3:] == [
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "also say bye"},
        ]
        assert len(debits(funded)) == 1

    def test_a_finished_runs_session_refuses_commands_and_forwards_nothing(self, funded, upstream):
        make_agent(funded, "over")
        sid = run(funded, "over").json()["sessionId"]
        response = funded.client.post(f"/v1/agents/sessions/{sid}/pause", {}, content_type="application/json")
        assert response.status_code == 409 and response.json()["code"] == "session_finished"

    def test_a_pause_never_resumed_ends_the_run_after_the_pause_timeout(self, funded, upstream, settings):
        settings.AGENTS_PAUSE_TIMEOUT_SECONDS = 0.3
        make_agent(funded, "forgotten")
        slow = threading.Event()
        upstream.script(Reply(hold=slow, content="unheard"))

        def script(sid, steer):
            steer.post(sid, "pause")
            slow.set()

        steer = Steer(funded, script)
        steer.start()
        response = run(funded, "forgotten")
        steer.finish()
        assert response.status_code == 502 and response.json()["error"] == "paused for longer than 0.3 s"
        assert session_status(funded, response.json()["sessionId"]) == "error" and debits(funded) == []

    def test_a_pause_ends_at_the_runs_deadline_when_that_comes_before_the_pause_timeout(self, funded, upstream, settings):
        settings.AGENTS_RUN_DEADLINE_SECONDS = 3.0  # shortened: 540 s against the pause timeout's 600 s by default
        settings.AGENTS_PAUSE_TIMEOUT_SECONDS = 60.0
        make_agent(funded, "overdue")
        slow = threading.Event()
        upstream.script(Reply(hold=slow, content="unheard"))

        def script(sid, steer):
            steer.post(sid, "pause")
            slow.set()

        steer = Steer(funded, script)
        steer.start()
        began = time.monotonic()
        response = run(funded, "overdue")
        took = time.monotonic() - began
        steer.finish()
        assert response.status_code == 502 and response.json()["error"] == "the run ran out of time while paused"
        assert took < 20  # ended at the deadline, long before the pause timeout
        sid = response.json()["sessionId"]
        assert session_status(funded, sid) == "error" and debits(funded) == []
        logs = [e["payload"].get("text") for e in events(funded, sid) if e["kind"] == "log"]
        assert "run paused" in logs and "run resumed" not in logs
