"""Approval of tool calls on routed runs (issue 28 item 7), with a real `python -m runner` and daphne.

The runner asks through the session (a `waiting` report) and lets go of its claim; a person
answers on the server; the run is offered again and the runner resumes it from the claim's
`resume` (the conversation the server rebuilt from the session's log), executing the approved
call once.
"""

from __future__ import annotations

import json

import pytest

from runs.models import Approval, Run
from targets.models import RoutedRun, Target
from tests.runner.test_daemon import inference_env, wait_until
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _run(handle, run_id) -> Run:
    with handle.context():
        return Run.objects.get(pk=run_id)


def _events(handle, session_id, kind):
    from sessions.models import Event

    with handle.context():
        return [json.loads(e.payload) for e in Event.objects.filter(session_id=session_id, kind=kind).order_by("seq")]


@pytest.fixture
def ruled(org_a, daphne_server, upstream, runner_factory, tmp_path):
    """A funded org, agent `shipper` whose `shell` calls need approval, a runner with a shell in
    `work`, and a routed run of it waiting on `echo once >> count.txt`: `(org, run, work, runner)`."""
    from billing.services import credit_add

    credit_add(org=org_a.org, cents=500, actor="test")
    work = tmp_path / "work"
    work.mkdir()
    created = org_a.client.post("/v1/agents", {"name": "shipper", "model": "test-model", "instructions": "Ship carefully.",
                                               "tools": ["shell", "calculator"], "approval": {"tools": ["shell"]}},
                                content_type="application/json")
    assert created.status_code == 201, created.content
    upstream.script(Reply(content="Counting first.", tool_calls=[("shell", {"command": "echo once >> count.txt && wc -l < count.txt"})],
                          model="test-model"))
    runner = runner_factory(daphne_server.url, org_a.key, "--allow-shell", str(work), env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = Target.objects.using(_alias(org_a)).all()
    wait_until(lambda: _serving(org_a, target.id), what="the first claim")
    started = org_a.client.post("/v1/agents/shipper/run", {"input": "ship it", "targetId": target.id}, content_type="application/json")
    assert started.status_code == 202, started.content
    body = started.json()
    wait_until(lambda: _run(org_a, body["id"]).status == "waiting", what="the run to wait for approval")
    return org_a, body, work, runner, target


def _alias(handle):
    from tenancy import stores

    with handle.context():
        return stores.current_alias()


def _serving(handle, target_id):
    from targets.models import ClaimKey

    with handle.context():
        key = ClaimKey.objects.filter(target_id=target_id).first()
    return key is not None and key.serving_at is not None


def test_approve_resumes_on_the_machine_executes_once_and_debits_once_and_the_claim_is_not_held(ruled, upstream):
    from tests.agents.conftest import debits

    org, body, work, runner, target = ruled
    assert not (work / "count.txt").exists()  # asked, nothing executed
    assert len(upstream.chat_requests) == 1
    with org.context():
        offer = RoutedRun.objects.get(pk=body["id"])
    assert (offer.state, offer.claimed_at) == ("waiting", None)
    session = org.client.get(f"/v1/agents/sessions/{body['sessionId']}").json()
    assert session["status"] == "paused" and [p["tool"] for p in session["pendingApprovals"]] == ["shell"]
    [asked] = _events(org, body["sessionId"], "approval")
    assert asked["arguments"] == {"command": "echo once >> count.txt && wc -l < count.txt"}
    with org.context():  # the machine's reported call is stored sealed until it is settled (issue 49)
        assert Approval.objects.get(run_id=body["id"]).arguments.startswith("sealed:v1:")
    # the claim is not held: the same runner serves another routed run while this one waits
    plain = org.client.post("/v1/agents", {"name": "plain", "model": "test-model"}, content_type="application/json")
    assert plain.status_code == 201, plain.content
    upstream.script(Reply(content="plain answer"))
    other = org.client.post("/v1/agents/plain/run", {"input": "hi", "targetId": target.id}, content_type="application/json").json()
    done_other = wait_until(lambda: (r := _run(org, other["id"])).status == "ok" and r, what="the other run on the same machine")
    assert done_other.output == "plain answer" and _run(org, body["id"]).status == "waiting"

    upstream.script(Reply(content="shipped: counted 1", model="test-model"))
    approved = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": asked["toolCallId"]},
                               content_type="application/json")
    assert approved.status_code == 200 and approved.json()["forwarded"] is True
    row = wait_until(lambda: (r := _run(org, body["id"])).status in ("ok", "error") and r, what="the resumed run to finish")
    assert (row.status, row.output, row.tool_calls) == ("ok", "shipped: counted 1", 1), row.error
    assert (work / "count.txt").read_text() == "once\n"  # executed exactly once
    [executed] = _events(org, body["sessionId"], "tool-call")
    assert executed["toolCallId"] == asked["toolCallId"] and executed["result"] == "exit 0\n1\n" and executed["error"] is False
    resumed = upstream.chat_requests[-1]["messages"]
    assert resumed[0] == {"role": "system", "content": "Ship carefully."} and resumed[1] == {"role": "user", "content": "ship it"}
    assert resumed[2]["role"] == "assistant" and resumed[2]["content"] == "Counting first."
    assert resumed[2]["tool_calls"][0]["id"] == asked["toolCallId"]
    assert resumed[3] == {"role": "tool", "tool_call_id": asked["toolCallId"], "content": "exit 0\n1\n"}
    # One debit each. The debit follows the finish's commit (`run_finish`: once the row commits),
    # and daphne serves the machine's report while this test reads: wait for it, then hold it.
    billed = sorted([body["id"], other["id"]])
    wait_until(lambda: sorted(d.run_id for d in debits(org)) == billed, what="the resumed run's debit")
    assert sorted(d.run_id for d in debits(org)) == billed
    with org.context():
        assert list(Approval.objects.filter(run_id=body["id"]).values_list("state", flat=True)) == ["done"]
        assert json.loads(Approval.objects.get(run_id=body["id"]).arguments) == {"command": "echo once >> count.txt && wc -l < count.txt"}
        assert RoutedRun.objects.get(pk=body["id"]).state == "reported"
    assert org.client.get(f"/v1/agents/sessions/{body['sessionId']}").json()["status"] == "done"
    assert runner.terminate() == 0


def test_deny_hands_the_machines_model_the_reason_and_nothing_runs(ruled, upstream):
    org, body, work, runner, _ = ruled
    [asked] = _events(org, body["sessionId"], "approval")
    upstream.script(Reply(content="not shipping, as asked", model="test-model"))
    denied = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/deny", {"toolCallId": asked["toolCallId"], "message": "freeze week"},
                             content_type="application/json")
    assert denied.status_code == 200
    row = wait_until(lambda: (r := _run(org, body["id"])).status in ("ok", "error") and r, what="the resumed run to finish")
    assert (row.status, row.output) == ("ok", "not shipping, as asked"), row.error
    assert not (work / "count.txt").exists()
    tool = upstream.chat_requests[-1]["messages"][-1]
    assert tool["role"] == "tool" and tool["tool_call_id"] == asked["toolCallId"]
    assert tool["content"].startswith("The tool call was not executed: denied by") and tool["content"].endswith(": freeze week.")
    [recorded] = _events(org, body["sessionId"], "tool-call")
    assert recorded["error"] is True and "freeze week" in recorded["result"]
    assert runner.terminate() == 0


def test_a_stop_while_waiting_ends_the_run_and_the_machine_never_gets_it_back(ruled, upstream):
    from tests.agents.conftest import debits

    org, body, work, runner, _ = ruled
    stopped = org.client.post(f"/v1/agents/sessions/{body['sessionId']}/stop", {"message": "cancelled"}, content_type="application/json")
    assert stopped.status_code == 200 and stopped.json()["forwarded"] is True
    row = _run(org, body["id"])
    assert (row.status, row.finish_reason) == ("error", "stopped") and "cancelled" in row.error
    with org.context():
        assert RoutedRun.objects.get(pk=body["id"]).state == "withdrawn"
        assert list(Approval.objects.filter(run_id=body["id"]).values_list("state", flat=True)) == ["cancelled"]
    runner.wait_for("POST")  # the runner keeps claiming: nothing comes back for this run
    assert f"claimed run {body['id']} (agent shipper), resumed" not in runner.log()
    assert not (work / "count.txt").exists() and len(upstream.chat_requests) == 1
    assert debits(org) == []
    assert runner.terminate() == 0
