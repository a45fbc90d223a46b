"""Human approval of tool calls (issue 28): asking, answering, resuming from the log, timers."""

from __future__ import annotations

import json
import os
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Approval, Run
from agents_site.vocabulary import ApprovalOutcome, ApprovalState, EventKind, RunStatus, SessionStatus
from sessions.models import Event, Session
from tests.agents.conftest import debits, fund, make_agent, run
from tests.support.task_queue import task_queue  # noqa: F401
from tests.support.upstream import Reply

# Both stores; the race of two request threads inside the test process stays on SQLite (tests/conftest.py).
pytestmark = pytest.mark.both_stores

RESUME = "runs.tasks.resume_run"


def _agent(org, name="asker", tools=("calculator", "current_time"), rules=("calculator",)):
    return make_agent(org, name, tools=list(tools), approval={"tools": list(rules)})


def _resume(queue):
    """Run every queued resume task inline, as a worker would; return how many there were."""
    from runs.tasks import resume_run

    tasks = [t for t in queue.tasks() if t.get("func") == RESUME]
    for task in tasks:
        resume_run(*task["args"])
    _drop(tasks)
    return len(tasks)


def _drop(tasks) -> None:
    from django_q.conf import Conf
    from django_q.models import OrmQ

    if Conf.ORM:
        ids = {t["id"] for t in tasks}
        for q in OrmQ.objects.all():
            if q.task.get("id") in ids:
                q.delete()
    else:  # Redis: the tests queue nothing else meanwhile
        from django_q.brokers import get_broker

        get_broker().purge_queue()


def _events(org, session_id, kind):
    with org.context():
        return [json.loads(e.payload) for e in Event.objects.filter(session_id=session_id, kind=kind).order_by("seq")]


def _tool_messages(request):
    return [m for m in request["messages"] if m["role"] == "tool"]


@pytest.fixture
def asking(org_a, upstream):
    """A funded org with agent `asker` whose `calculator` calls need approval, and a run waiting on one."""
    fund(org_a)
    _agent(org_a)
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "2+3"})]))
    response = run(org_a, "asker", "add")
    return org_a, response


def test_agent_approval_rules_are_validated_against_its_tools(org_a, upstream):
    created = _agent(org_a, "ruled", rules=("calculator", "current_*"))
    assert created["approval"] == {"tools": ["calculator", "current_*"]}
    bad = org_a.client.post("/v1/agents", {"name": "bad", "tools": ["calculator"], "approval": {"tools": ["http_get"]}},
                            content_type="application/json")
    assert bad.status_code == 400
    assert bad.json()["code"] == "invalid_request" and "approval.tools[0]" in bad.json()["error"]
    # dropping the tool a rule names is refused too: rules always name tools the agent has
    patched = org_a.client.patch("/v1/agents/ruled", {"tools": ["current_time"]}, content_type="application/json")
    assert patched.status_code == 400 and "approval.tools[0]" in patched.json()["error"]
    assert org_a.client.get("/v1/agents/ruled").json()["tools"] == ["calculator", "current_time"]


def test_approval_is_a_reserved_agent_name(org_a, upstream):
    response = org_a.client.post("/v1/agents", {"name": "approvals"}, content_type="application/json")
    assert response.status_code == 400


def test_required_approval_answers_202_with_the_pending_request_and_executes_nothing(asking, upstream):
    org, response = asking
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == RunStatus.WAITING
    assert response["Location"] == f"/v1/agents/runs/{body['id']}"
    [request] = body["approvals"]
    assert request["tool"] == "calculator" and request["state"] == ApprovalState.PENDING
    assert request["arguments"] == {"expression": "2+3"}
    assert len([r for r in upstream.requests if "messages" in r]) == 1  # no second model call: nothing executed
    assert _events(org, body["sessionId"], EventKind.TOOL_CALL) == []
    [asked] = _events(org, body["sessionId"], EventKind.APPROVAL)
    assert asked["toolCallId"] == request["toolCallId"] and asked["mayAnswer"]["orgAdmins"] is True
    with org.context():
        session = Session.objects.get(pk=body["sessionId"])
        assert session.status == SessionStatus.PAUSED and session.executor_channel == ""
    assert debits(org) == []
    polled = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert polled["status"] == RunStatus.WAITING and polled["approvals"][0]["toolCallId"] == request["toolCallId"]


def test_approve_executes_once_the_run_ends_ok_and_is_debited_once(asking, upstream, task_queue):
    org, response = asking
    body = response.json()
    upstream.script(Reply(content="five"))
    answer = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve",
                             {"toolCallId": body["approvals"][0]["toolCallId"]}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["forwarded"] is True and answer.json()["approval"]["state"] == ApprovalState.APPROVED
    assert answer.json()["event"]["kind"] == EventKind.CONTROL
    assert _resume(task_queue) == 1
    done = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert done["status"] == RunStatus.OK and done["output"] == "five"
    # The finished run still lists what it asked and how it was answered (issue 57: it listed nothing).
    [asked] = done["approvals"]
    assert (asked["state"], asked["outcome"], asked["startedBy"]) == (ApprovalState.DONE, ApprovalOutcome.APPROVED, f"{org.slug}/{org.user.username}")
    [executed] = _events(org, body["sessionId"], EventKind.TOOL_CALL)
    assert executed["result"] == "5" and executed["toolCallId"] == body["approvals"][0]["toolCallId"]
    assert [m["content"] for m in _tool_messages(upstream.requests[-1])] == ["5"]
    assert len(debits(org)) == 1
    # a second delivery of the resume task, or a second answer, executes nothing more
    from runs.tasks import resume_run

    assert resume_run(org.slug, body["id"]) == RunStatus.OK
    again = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve",
                            {"toolCallId": body["approvals"][0]["toolCallId"]}, content_type="application/json")
    assert again.status_code == 409
    assert len(_events(org, body["sessionId"], EventKind.TOOL_CALL)) == 1 and len(debits(org)) == 1


def test_edited_arguments_are_the_ones_used(asking, upstream, task_queue):
    org, response = asking
    body = response.json()
    upstream.script(Reply(content="done"))
    answer = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve",
                             {"toolCallId": body["approvals"][0]["toolCallId"], "arguments": {"expression": "6*7"}},
                             content_type="application/json")
    assert answer.status_code == 200, answer.content
    _resume(task_queue)
    assert [m["content"] for m in _tool_messages(upstream.requests[-1])] == ["42"]
    done = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert done["status"] == RunStatus.OK and done["approvals"][0]["outcome"] == ApprovalOutcome.EDITED


def test_edited_arguments_outside_the_tool_schema_are_422_and_nothing_changes(asking, upstream, task_queue):
    org, response = asking
    body = response.json()
    answer = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve",
                             {"toolCallId": body["approvals"][0]["toolCallId"], "arguments": {"expression": 7}},
                             content_type="application/json")
    assert answer.status_code == 422 and answer.json()["code"] == "invalid_arguments"
    with org.context():
        assert Approval.objects.get(tool_call_id=body["approvals"][0]["toolCallId"]).state == ApprovalState.PENDING
    assert task_queue.ids(RESUME) == []


def test_deny_hands_the_model_the_reason(asking, upstream, task_queue):
    org, response = asking
    body = response.json()
    upstream.script(Reply(content="ok, not adding"))
    answer = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/deny",
                             {"toolCallId": body["approvals"][0]["toolCallId"], "message": "use the spreadsheet"},
                             content_type="application/json")
    assert answer.status_code == 200, answer.content
    _resume(task_queue)
    [tool] = _tool_messages(upstream.requests[-1])
    assert "denied" in tool["content"] and "use the spreadsheet" in tool["content"]
    done = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert done["status"] == RunStatus.OK and done["output"] == "ok, not adding"
    # Denied and then handed to the model: `done`, and still read "denied" (issue 57: both read "done").
    assert [(a["state"], a["outcome"]) for a in done["approvals"]] == [(ApprovalState.DONE, ApprovalOutcome.DENIED)]
    listed = org.client.get(f"/v1/agents/approvals?session={body['sessionId']}").json()["approvals"]
    assert [(a["outcome"], a["startedBy"]) for a in listed] == [(ApprovalOutcome.DENIED, f"{org.slug}/{org.user.username}")]
    [recorded] = _events(org, body["sessionId"], EventKind.TOOL_CALL)
    assert recorded["error"] is True and "use the spreadsheet" in recorded["result"]


def test_resume_command_while_pending_is_409_approval_pending(asking):
    org, response = asking
    answer = org.client.post(f"/v1/agents/sessions/{response.json()['sessionId']}/resume", {}, content_type="application/json")
    assert answer.status_code == 409 and answer.json()["code"] == "approval_pending"


def test_stop_while_waiting_ends_the_run_at_once_unbilled(asking, task_queue):
    org, response = asking
    body = response.json()
    stopped = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/stop", {"message": "not now"}, content_type="application/json")
    assert stopped.status_code == 200 and stopped.json()["forwarded"] is True
    done = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert done["status"] == RunStatus.ERROR and "stopped by" in done["error"] and "not now" in done["error"]
    assert done["finishReason"] == "stopped"
    assert [a["outcome"] for a in done["approvals"]] == [ApprovalOutcome.STOPPED]
    with org.context():
        assert Session.objects.get(pk=body["sessionId"]).status == SessionStatus.ERROR
        assert Approval.objects.get(run_id=body["id"]).state == ApprovalState.CANCELLED
    late = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve",
                           {"toolCallId": body["approvals"][0]["toolCallId"]}, content_type="application/json")
    assert late.status_code == 409
    assert debits(org) == []


def test_unanswered_request_expires_with_the_sweep_unbilled(asking, settings):
    org, response = asking
    body = response.json()
    settings.AGENTS_APPROVAL_TIMEOUT_SECONDS = 60
    from runs.approvals import approvals_sweep

    with org.context():
        assert approvals_sweep() == []  # not yet
        assert approvals_sweep(now=timezone.now() + timedelta(seconds=61)) == [body["id"]]
    done = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert done["status"] == RunStatus.ERROR and done["error"] == "approval timed out"
    assert [a["outcome"] for a in done["approvals"]] == [ApprovalOutcome.TIMED_OUT]
    assert debits(org) == []


def test_every_other_timer_passes_a_waiting_run_by(asking, settings):
    org, response = asking
    body = response.json()
    settings.AGENTS_SESSION_IDLE_SECONDS = 1
    settings.AGENTS_SESSION_MAX_SECONDS = 1
    settings.AGENTS_PAUSE_TIMEOUT_SECONDS = 0.01
    settings.AGENTS_RUN_LEASE_SECONDS = 1
    from runs.reaper import reap_org
    from runs.recovery import recover_org
    from runs.approvals import approvals_sweep

    later = timezone.now() + timedelta(hours=3)
    with org.context():
        assert reap_org(org=org.slug, now=later) == []
        recover_org(org=org.slug, now=later)
        assert approvals_sweep(now=later) == []  # 3 h < the default 24 h
        assert Run.objects.get(pk=body["id"]).status == RunStatus.WAITING
        assert Session.objects.get(pk=body["sessionId"]).status == SessionStatus.PAUSED


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(os.environ.get("AGENTS_TEST_STORES") == "postgres", reason="threads in the test process: SQLite pass only")
def test_two_simultaneous_approvals_execute_once(org_a, upstream, task_queue):
    fund(org_a)
    _agent(org_a)
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "2+3"})]))
    org, response = org_a, run(org_a, "asker", "add")
    body = response.json()
    upstream.script(Reply(content="five"))
    call_id = body["approvals"][0]["toolCallId"]
    answers = []
    go = threading.Barrier(2)

    def answer():
        from django.db import connections

        go.wait()
        try:
            answers.append(org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": call_id},
                                           content_type="application/json").status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=answer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(answers) == [200, 409]
    _resume(task_queue)
    assert len(_events(org, body["sessionId"], EventKind.TOOL_CALL)) == 1
    assert len(debits(org)) == 1


def test_foreign_org_gets_404(asking, org_b):
    org, response = asking
    body = response.json()
    answer = org_b.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve",
                               {"toolCallId": body["approvals"][0]["toolCallId"]}, content_type="application/json")
    assert answer.status_code == 404
    unknown = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": "call_nope"},
                              content_type="application/json")
    assert unknown.status_code == 404


def test_member_who_neither_started_nor_administers_gets_403(asking):
    from django.test import Client

    from tenancy.services import api_key_create, membership_set

    org, response = asking
    body = response.json()
    member = membership_set(org=org.org, username=f"member-{org.slug}", password="pw", is_admin=False)
    _, key = api_key_create(org=org.org, user=member.user)
    answer = Client(HTTP_AUTHORIZATION=f"Bearer {key}").post(
        f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][0]["toolCallId"]},
        content_type="application/json")
    assert answer.status_code == 403
    with org.context():
        assert Approval.objects.get(run_id=body["id"]).state == ApprovalState.PENDING


def test_a_call_that_started_before_its_worker_died_is_not_run_again(asking, upstream, task_queue):
    org, response = asking
    body = response.json()
    org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][0]["toolCallId"]},
                    content_type="application/json")
    with org.context():  # as if a resume took the call and its worker died mid-tool
        Approval.objects.filter(run_id=body["id"]).update(state=ApprovalState.STARTED)
    upstream.script(Reply(content="gave up"))
    _resume(task_queue)
    [tool] = _tool_messages(upstream.requests[-1])
    assert tool["content"].startswith("interrupted, not re-run")
    with org.context():
        assert Approval.objects.get(run_id=body["id"]).state == ApprovalState.INTERRUPTED


def test_stream_ends_with_an_approval_frame(org_a, upstream):
    fund(org_a)
    _agent(org_a)
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "1+1"})]))
    from tests.runs.test_run_stream import frames_of

    response = org_a.client.post("/v1/agents/asker/run", {"input": "x", "stream": True}, content_type="application/json")
    event, data = frames_of(response)[-1]
    assert event == "approval"
    assert data["status"] == RunStatus.WAITING and data["approvals"][0]["tool"] == "calculator"


def test_calls_needing_no_approval_wait_with_the_others(org_a, upstream, task_queue):
    fund(org_a)
    _agent(org_a)
    upstream.script(Reply(tool_calls=[("current_time", {"timezone": "UTC"}), ("calculator", {"expression": "1+2"})]))
    body = run(org_a, "asker", "both").json()
    assert [(a["tool"], a["needsApproval"]) for a in body["approvals"]] == [("current_time", False), ("calculator", True)]
    assert _events(org_a, body["sessionId"], EventKind.TOOL_CALL) == []
    upstream.script(Reply(content="ok"))
    org_a.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][1]["toolCallId"]},
                      content_type="application/json")
    _resume(task_queue)
    assert [e["name"] for e in _events(org_a, body["sessionId"], EventKind.TOOL_CALL)] == ["current_time", "calculator"]
    assert len(_tool_messages(upstream.requests[-1])) == 2


def test_a_resumed_run_lost_mid_tool_is_resumed_again_and_the_tool_not_rerun(asking, upstream, task_queue, settings):
    """The worker that resumed the run died while the approved tool ran: recovery puts the run back
    to `waiting`, the next resume hands the model "interrupted, not re-run"; the tool ran once."""
    from runs.recovery import recover_org
    from runs.models import RunTask

    org, response = asking
    body = response.json()
    org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][0]["toolCallId"]},
                    content_type="application/json")
    _drop([t for t in task_queue.tasks() if t.get("func") == RESUME])
    with org.context():  # the resume took the run and the call, then its process died (pid 999999 is gone)
        Run.objects.filter(pk=body["id"]).update(status=RunStatus.RUNNING)
        Approval.objects.filter(run_id=body["id"]).update(state=ApprovalState.STARTED)
        RunTask.objects.update_or_create(run_id=body["id"], defaults={"created_at": timezone.now(), "worker": "gone-host:999999",
                                                                      "heartbeat_at": timezone.now() - timedelta(hours=1)})
        report = recover_org(org=org.slug, now=timezone.now())
        assert report.lost == [] and report.redispatched == [body["id"]]
        assert Run.objects.get(pk=body["id"]).status == RunStatus.WAITING
    upstream.script(Reply(content="the addition was interrupted"))
    assert _resume(task_queue) == 1
    assert _tool_messages(upstream.requests[-1])[0]["content"].startswith("interrupted, not re-run")
    assert _events(org, body["sessionId"], EventKind.TOOL_CALL)[0]["result"].startswith("interrupted, not re-run")
    done = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert done["status"] == RunStatus.OK and len(debits(org)) == 1


def test_a_background_run_waits_too_and_its_worker_returns(org_a, upstream, task_queue):
    from runs.tasks import execute_run

    fund(org_a)
    _agent(org_a)
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "4*4"})]))
    accepted = org_a.client.post("/v1/agents/asker/run", {"input": "square", "background": True}, content_type="application/json")
    assert accepted.status_code == 202
    run_id = accepted.json()["runId"]
    assert execute_run(org_a.slug, run_id) == RunStatus.WAITING  # the worker slot is free again
    polled = org_a.client.get(f"/v1/agents/runs/{run_id}").json()
    upstream.script(Reply(content="sixteen"))
    org_a.client.post(f"/v1/agents/sessions/{polled['sessionId']}/approve", {"toolCallId": polled["approvals"][0]["toolCallId"]},
                      content_type="application/json")
    _resume(task_queue)
    done = org_a.client.get(f"/v1/agents/runs/{run_id}").json()
    assert done["status"] == RunStatus.OK and done["output"] == "sixteen"
    assert len(debits(org_a)) == 1


def test_a_published_session_shows_the_request_and_the_decision_but_not_who_may_answer(asking, upstream, task_queue):
    org, response = asking
    body = response.json()
    upstream.script(Reply(content="five"))
    org.client.post(f"/v1/agents/sessions/{body['sessionId']}/deny", {"toolCallId": body["approvals"][0]["toolCallId"],
                                                                       "message": "no maths today"}, content_type="application/json")
    _resume(task_queue)
    published = org.client.patch(f"/v1/agents/sessions/{body['sessionId']}", {"project": "sums", "published": True},
                                 content_type="application/json")
    assert published.status_code == 200, published.content
    build = org.client.get(f"/v1/agents/builds/{org.slug}/sums")
    assert build.status_code == 200
    bodies = [turn["body"] for turn in build.json()["turns"]]
    assert any(b.startswith("asked to approve calculator") and "2+3" in b for b in bodies)
    assert any(b.startswith("denied ") and b.endswith(": no maths today") for b in bodies)
    assert "mayAnswer" not in build.content.decode() and "orgAdmins" not in build.content.decode()


def test_two_ruled_calls_of_one_turn_resume_only_once_both_are_answered(org_a, upstream, task_queue):
    fund(org_a)
    _agent(org_a)
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "1+1"}), ("calculator", {"expression": "2+2"})]))
    body = run(org_a, "asker", "two sums").json()
    first, second = body["approvals"]
    assert first["needsApproval"] and second["needsApproval"] and len(_events(org_a, body["sessionId"], EventKind.APPROVAL)) == 2
    one = org_a.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": first["toolCallId"]},
                            content_type="application/json")
    assert one.status_code == 200 and one.json()["forwarded"] is False
    assert task_queue.ids(RESUME) == []  # still waiting for the second answer
    upstream.script(Reply(content="two, and no four"))
    two = org_a.client.post(f"/v1/agents/sessions/{body['sessionId']}/deny", {"toolCallId": second["toolCallId"]},
                            content_type="application/json")
    assert two.status_code == 200 and two.json()["forwarded"] is True
    assert _resume(task_queue) == 1
    results = [m["content"] for m in _tool_messages(upstream.requests[-1])]
    assert results[0] == "2" and results[1].startswith("The tool call was not executed: denied")
    assert org_a.client.get(f"/v1/agents/runs/{body['id']}").json()["status"] == RunStatus.OK


def test_an_agent_called_as_a_tool_does_not_wait_and_does_not_execute_the_ruled_call(org_a, upstream):
    fund(org_a)
    _agent(org_a, "worker")
    make_agent(org_a, "boss", tools=["agent_worker"])
    upstream.script(Reply(tool_calls=[("agent_worker", {"input": "add 2+3"})]),
                    Reply(tool_calls=[("calculator", {"expression": "2+3"})]),  # the worker's turn
                    Reply(content="could not add"),  # the worker, told the call was not executed
                    Reply(content="the worker could not add"))  # the boss
    response = run(org_a, "boss", "delegate")
    assert response.status_code == 200, response.content
    with org_a.context():
        assert not Run.objects.filter(status=RunStatus.WAITING).exists()
        assert not Approval.objects.exists()
    worker_turn = upstream.requests[-2]["messages"]
    assert worker_turn[-1]["role"] == "tool" and "cannot wait" in worker_turn[-1]["content"]


def test_a_key_of_scope_openai_cannot_answer_even_for_its_own_user(asking):
    from django.test import Client

    from agents_site.vocabulary import ApiKeyScope
    from tenancy.services import api_key_create

    org, response = asking
    body = response.json()
    _, key = api_key_create(org=org.org, user=org.user, scope=ApiKeyScope.OPENAI)
    answer = Client(HTTP_AUTHORIZATION=f"Bearer {key}").post(
        f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][0]["toolCallId"]},
        content_type="application/json")
    assert answer.status_code == 403 and answer.json()["code"] == "forbidden"
    with org.context():
        assert Approval.objects.get(run_id=body["id"]).state == ApprovalState.PENDING


def test_the_user_who_started_the_run_may_answer_without_being_an_admin(make_org, upstream, task_queue):
    org = make_org("mem", admin=False)
    fund(org)
    with org.context():
        from agents.services import AgentInput, agent_create

        agent_create(data=AgentInput(name="asker", tools=["calculator"], approval={"tools": ["calculator"]}))
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "2+3"})]))
    body = run(org, "asker", "add").json()
    answer = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][0]["toolCallId"]},
                             content_type="application/json")
    assert answer.status_code == 200, answer.content


def test_the_org_run_list_filters_waiting_runs(asking):
    org, response = asking
    listed = org.client.get("/v1/agents/runs?status=waiting")
    assert listed.status_code == 200
    assert [r["id"] for r in listed.json()["runs"]] == [response.json()["id"]]
    assert org.client.get("/v1/agents/runs").json()["runs"] == []  # not finished: not in the history


def test_the_session_reports_paused_with_the_pending_request(asking):
    org, response = asking
    body = response.json()
    session = org.client.get(f"/v1/agents/sessions/{body['sessionId']}").json()
    assert session["status"] == SessionStatus.PAUSED
    assert [p["toolCallId"] for p in session["pendingApprovals"]] == [body["approvals"][0]["toolCallId"]]
    stopped = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/stop", {}, content_type="application/json")
    assert stopped.status_code == 200
    assert "pendingApprovals" not in org.client.get(f"/v1/agents/sessions/{body['sessionId']}").json()


def test_a_resumed_run_hands_the_model_every_earlier_result_whole(org_a, upstream, task_queue):
    """A result longer than the old 4 KiB event preview (here a 10 KiB reply of an agent called as a
    tool) comes back whole when the run is rebuilt from its log: the resumed request's messages
    before the approved call are the ones the model had when it asked."""
    fund(org_a)
    make_agent(org_a, "writer")
    make_agent(org_a, "asker", tools=["agent_writer", "calculator"], approval={"tools": ["calculator"]})
    long_text = "".join(f"line {n:05d} of the writer's long answer\n" for n in range(260))  # ≈ 10 KiB
    assert 8 * 1024 < len(long_text.encode()) < 16 * 1024
    upstream.script(Reply(tool_calls=[("agent_writer", {"input": "write"})]),
                    Reply(content=long_text),  # the writer
                    Reply(tool_calls=[("calculator", {"expression": "2+3"})]))  # the asker, now waiting
    body = run(org_a, "asker", "go").json()
    assert body["status"] == RunStatus.WAITING, body
    asked_with = upstream.requests[-1]["messages"]
    assert [m["content"] for m in _tool_messages(upstream.requests[-1])] == [long_text]
    upstream.script(Reply(content="done"))
    answer = org_a.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][0]["toolCallId"]},
                               content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert _resume(task_queue) == 1
    resumed = upstream.requests[-1]["messages"]
    assert [m["content"] for m in _tool_messages(upstream.requests[-1])] == [long_text, "5"]
    assert [(m["role"], m.get("content")) for m in resumed[:len(asked_with)]] == [(m["role"], m.get("content")) for m in asked_with]
    assert org_a.client.get(f"/v1/agents/runs/{body['id']}").json()["status"] == RunStatus.OK


def test_a_stop_recorded_while_the_run_suspended_ends_it_at_resume_and_runs_no_tool(asking, upstream, task_queue):
    """A stop whose seq precedes the approval request (recorded while the run was suspending: it
    reached neither the executor nor the waiting-run handler) is honoured when the answer resumes
    the run — before any approved call executes — not only by the finish after the tools ran
    (found by review: the work was done and then left unbilled)."""
    from sessions.services import session_append_event

    org, response = asking
    body = response.json()
    with org.context():
        approval = Event.objects.filter(session_id=body["sessionId"], kind=EventKind.APPROVAL).order_by("seq").first()
        stop = session_append_event(session_id=body["sessionId"], kind=EventKind.CONTROL, payload={"command": "stop", "message": "no"},
                                    actor=f"{org.slug}/ann")
        Event.objects.filter(pk=stop.id).update(seq=0)  # as if recorded before the request
        assert approval is not None and Run.objects.get(pk=body["id"]).status == RunStatus.WAITING
    answer = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][0]["toolCallId"]},
                             content_type="application/json")
    assert answer.status_code == 200, answer.content
    requests_before = len(upstream.requests)
    _resume(task_queue)
    done = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert (done["status"], done["finishReason"]) == (RunStatus.ERROR, "stopped") and done["error"] == f"stopped by {org.slug}/ann: no"
    assert _events(org, body["sessionId"], EventKind.TOOL_CALL) == [] and len(upstream.requests) == requests_before
    assert debits(org) == []


def test_a_run_that_waits_twice_is_rebuilt_with_every_earlier_tool_result_whole(asking, upstream, task_queue):
    """The log is the checkpoint: a result longer than 4 KiB (here a denial's 6 KiB reason) comes
    back whole when the run is rebuilt again after its second wait — what an uninterrupted run sent."""
    org, response = asking
    body = response.json()
    reason = "r" * (6 * 1024)
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "3+4"})]))  # the model asks again
    org.client.post(f"/v1/agents/sessions/{body['sessionId']}/deny", {"toolCallId": body["approvals"][0]["toolCallId"], "message": reason},
                    content_type="application/json")
    _resume(task_queue)
    first_denial = _tool_messages(upstream.requests[-1])[0]["content"]
    assert first_denial.endswith(reason + ".")
    polled = org.client.get(f"/v1/agents/runs/{body['id']}").json()
    assert polled["status"] == RunStatus.WAITING
    upstream.script(Reply(content="seven"))
    org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": polled["approvals"][0]["toolCallId"]},
                    content_type="application/json")
    _resume(task_queue)
    assert [m["content"] for m in _tool_messages(upstream.requests[-1])] == [first_denial, "7"]
    assert org.client.get(f"/v1/agents/runs/{body['id']}").json()["status"] == RunStatus.OK


def _org_store_bytes(org) -> bytes:
    from django.db import connections

    from tenancy import stores
    from tests.support.stored import stored_bytes

    with org.context():
        return stored_bytes(connections[stores.current_alias()])


@pytest.mark.parametrize("answer", ["approve", "deny"])
def test_a_ruled_calls_arguments_are_sealed_until_decided_and_then_masked_never_stored_raw(org_a, upstream, task_queue, answer):
    # Issue 49 item 2: masked in the 202, the lists and the events; sealed in the store while pending
    # (opened only to execute); the masked form once the call is settled; never the raw value, WAL included.
    from runs.approvals import SEALED, open_arguments
    from tests.support.credentials import credential_corpus

    token = next(value for name, _, value in credential_corpus() if name == "github-classic-pat")
    fund(org_a)
    _agent(org_a, "sealer")
    upstream.script(Reply(tool_calls=[("calculator", {"expression": f"len('{token}')"})]))
    response = run(org_a, "sealer", "count")
    assert response.status_code == 202 and token not in response.content.decode()
    body = response.json()
    with org_a.context():
        stored = Approval.objects.get(run_id=body["id"]).arguments
    assert stored.startswith(SEALED) and token not in stored and token in open_arguments(stored)
    assert token.encode() not in _org_store_bytes(org_a)
    listed = org_a.client.get(f"/v1/agents/approvals?session={body['sessionId']}")
    assert token not in listed.content.decode() and "[redacted:github-token:" in listed.content.decode()

    upstream.script(Reply(content="done"))
    decided = org_a.client.post(f"/v1/agents/sessions/{body['sessionId']}/{answer}",
                                {"toolCallId": body["approvals"][0]["toolCallId"], **({"message": "no"} if answer == "deny" else {})},
                                content_type="application/json")
    assert decided.status_code == 200, decided.content
    assert _resume(task_queue) == 1
    with org_a.context():
        settled = Approval.objects.get(run_id=body["id"])
    assert settled.state == ApprovalState.DONE and not settled.arguments.startswith(SEALED)
    assert "[redacted:github-token:" in settled.arguments and token not in settled.arguments
    assert token.encode() not in _org_store_bytes(org_a)
