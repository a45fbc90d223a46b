"""Routed runs: POST /v1/agents/{ref}/run with targetId, the gate, the offer, the settled run."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.models import Run
from billing.models import LedgerEntry
from billing.selectors import balance_cents
from sessions.models import Event, Session
from targets.models import ClaimKey, RoutedRun, Target
from tests.targets.conftest import patch, post

pytestmark = pytest.mark.usefixtures("short_wait")


@pytest.fixture
def short_wait(settings):
    settings.AGENTS_CLAIM_WAIT_SECONDS = 0.2


@pytest.fixture
def funded(org_a):
    from billing.services import credit_add

    credit_add(org=org_a.org, cents=1000, actor="test")
    return org_a


@pytest.fixture
def agent(org_a):
    r = org_a.client.post("/v1/agents", {"name": "builder", "model": "m1", "instructions": "Build it.", "tools": ["calculator", "shell"]},
                          content_type="application/json")
    assert r.status_code == 201, r.json()
    return r.json()


@pytest.fixture
def live_machine(org_a, machine):
    """A keyed machine whose daemon just claimed (the gate admits it)."""
    target_id, key = machine
    assert claim(org_a, target_id, key).status_code == 204
    return target_id, key


def run(handle, body, **headers):
    return handle.client.post("/v1/agents/builder/run", body, content_type="application/json", headers=headers)


def claim(handle, target_id, key):
    return post(handle.client, f"/{target_id}/claim", **{"X-Target-Key": key})


def report(handle, target_id, run_id, key, body):
    return post(handle.client, f"/{target_id}/runs/{run_id}/report", body, **{"X-Target-Key": key})


def stored(handle):
    with handle.context():
        return {
            "runs": list(Run.objects.all()),
            "sessions": list(Session.objects.all()),
            "offers": list(RoutedRun.objects.all()),
        }


def events(handle, session_id):
    with handle.context():
        return [(e.kind, json.loads(e.payload or "null")) for e in Event.objects.filter(session_id=session_id).order_by("seq")]


# --- routing ------------------------------------------------------------------------------


def test_a_routed_run_answers_202_and_waits_in_the_machines_mailbox(funded, agent, live_machine, settings):
    settings.INFERENCE_BASE_URL = ""  # the server needs no gateway: the machine uses its own
    target_id, _ = live_machine
    r = run(funded, {"input": "ship it", "targetId": target_id})
    assert r.status_code == 202
    body = r.json()
    assert body["status"] == "running" and body["agent"] == "builder" and body["input"] == "ship it"
    state = stored(funded)
    [row], [session], [offer] = state["runs"], state["sessions"], state["offers"]
    assert row.id == body["id"] and row.status == "running" and row.session_id == session.id == body["sessionId"]
    assert session.target == target_id and session.host == "box.local" and session.status == "running"
    assert offer.run_id == row.id and offer.target_id == target_id and offer.state == "offered"
    assert offer.payload["agent"] == {"name": "builder", "model": "m1", "instructions": "Build it.", "tools": ["calculator", "shell"]}
    assert offer.payload["input"] == "ship it"
    load = funded.client.get(f"/v1/agents/targets/{target_id}").json()
    assert (load["sessions"], load["running"]) == (1, 1)


def test_the_machine_receives_the_agent_and_input_and_no_credential(funded, agent, live_machine, settings):
    settings.INFERENCE_BASE_URL = "http://gateway.invalid/v1"
    settings.INFERENCE_API_KEY = "sk-server-secret"
    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    r = claim(funded, target_id, key)
    assert r.status_code == 200
    body = r.json()
    assert body["runId"] == started["id"] and body["sessionId"] == started["sessionId"]
    assert body["agent"]["name"] == "builder" and body["input"] == "go"
    assert body["toolRounds"] == settings.AGENTS_TOOL_ROUNDS and body["timeoutSeconds"] == settings.AGENTS_ROUTED_RUN_TIMEOUT_SECONDS
    assert "sk-server-secret" not in r.content.decode() and "gateway.invalid" not in r.content.decode()


def test_a_report_records_the_run_closes_its_session_and_debits_it_once(funded, agent, live_machine):
    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    claim(funded, target_id, key)
    result = {"status": "ok", "output": "shipped", "model": "local-llm", "promptTokens": 12, "completionTokens": 4, "toolCalls": 2, "durationMs": 1500}
    assert report(funded, target_id, started["id"], key, result).json() == {"delivered": True}
    with funded.context():
        row = Run.objects.get(pk=started["id"])
        session = Session.objects.get(pk=started["sessionId"])
    assert (row.status, row.output, row.error, row.model) == ("ok", "shipped", "", "local-llm")
    assert (row.prompt_tokens, row.completion_tokens, row.tool_calls, row.duration_ms) == (12, 4, 2, 1500)
    assert row.finished_at is not None and session.status == "done"
    kind, summary = events(funded, session.id)[-1]
    assert kind == "log" and summary["runId"] == row.id and summary["status"] == "ok" and summary["model"] == "local-llm"
    debits = list(LedgerEntry.objects.filter(org=funded.org, kind="agent"))
    assert [(d.run_id, d.amount_cents, d.model) for d in debits] == [(row.id, -100, "local-llm")]
    assert balance_cents(org=funded.org) == 900
    assert report(funded, target_id, started["id"], key, result).json() == {"delivered": False}
    assert LedgerEntry.objects.filter(org=funded.org, kind="agent").count() == 1
    history = funded.client.get("/v1/agents/builder/runs").json()["runs"]
    assert [(h["id"], h["status"]) for h in history] == [(row.id, "ok")]


def test_a_failed_report_records_an_error_run_and_debits_nothing(funded, agent, live_machine):
    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    claim(funded, target_id, key)
    assert report(funded, target_id, started["id"], key, {"status": "error", "error": "disk full", "model": "m1"}).json() == {"delivered": True}
    with funded.context():
        row = Run.objects.get(pk=started["id"])
        session = Session.objects.get(pk=started["sessionId"])
    assert (row.status, row.error, row.output) == ("error", "disk full", "")
    assert session.status == "error"
    assert not LedgerEntry.objects.filter(org=funded.org, kind="agent").exists()
    assert balance_cents(org=funded.org) == 1000


# --- the gate, the money and bad input: refused with nothing recorded ----------------------


def _refusal(handle, response, status, code, message):
    assert response.status_code == status
    assert response.json() == {"status": status, "code": code, "error": message}
    assert stored(handle) == {"runs": [], "sessions": [], "offers": []}


@pytest.mark.parametrize(
    "setup, message",
    [
        ("offline", "target is offline"),
        ("draining", "target is draining"),
        ("stale heartbeat", "target is offline: no heartbeat for 90 s"),
        ("never claimed", "target has not claimed work within 90 s; is its runner running?"),
        ("claim too old", "target has not claimed work within 90 s; is its runner running?"),
    ],
)
def test_the_gate_refuses_an_unavailable_machine_with_409_and_the_reason(funded, agent, machine, setup, message):
    target_id, key = machine
    if setup != "never claimed":
        claim(funded, target_id, key)
    if setup in ("offline", "draining"):
        patch(funded.client, f"/{target_id}", {"status": setup})
    with funded.context():
        if setup == "stale heartbeat":
            Target.objects.filter(pk=target_id).update(metrics={"load1": 1.0}, metrics_at=timezone.now() - timedelta(seconds=91))
        if setup == "claim too old":
            ClaimKey.objects.filter(target_id=target_id).update(serving_at=timezone.now() - timedelta(seconds=91))
    _refusal(funded, run(funded, {"input": "go", "targetId": target_id}), 409, "target_unavailable", message)


def test_the_gate_refuses_a_keyless_machine(funded, agent):
    target_id = post(funded.client, "", {"label": "keyless"}).json()["id"]
    _refusal(funded, run(funded, {"input": "go", "targetId": target_id}), 409, "target_unavailable", "target has no claim key")


def test_an_unknown_or_foreign_machine_is_not_found(funded, agent, org_b):
    foreign = post(org_b.client, "", {"label": "theirs"}).json()["id"]
    for target_id in (foreign, "tgt_" + "0" * 32, ""):
        _refusal(funded, run(funded, {"input": "go", "targetId": target_id}), 404, "not_found", "target not found")


def test_an_unfunded_org_gets_402_and_nothing_is_offered(org_a, agent, live_machine):
    target_id, _ = live_machine
    r = run(org_a, {"input": "go", "targetId": target_id})
    assert r.status_code == 402 and r.json()["code"] == "insufficient_balance"
    assert stored(org_a) == {"runs": [], "sessions": [], "offers": []}


def test_an_oversized_input_is_400_and_nothing_is_offered(funded, agent, live_machine):
    target_id, _ = live_machine
    _refusal(funded, run(funded, {"input": "x" * (128 * 1024 + 1), "targetId": target_id}), 400, "invalid_request", "input too large")


# --- stopped, removed, abandoned ----------------------------------------------------------


def test_a_run_stopped_before_any_claim_is_withdrawn_and_recorded_as_an_error(funded, agent, live_machine):
    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    stop = funded.client.post(f"/v1/agents/sessions/{started['sessionId']}/stop", {"message": "changed my mind"}, content_type="application/json")
    assert stop.status_code == 200
    assert claim(funded, target_id, key).status_code == 204
    with funded.context():
        row = Run.objects.get(pk=started["id"])
        offer = RoutedRun.objects.get(pk=started["id"])
        session = Session.objects.get(pk=started["sessionId"])
    assert offer.state == "withdrawn"
    assert (row.status, row.error) == ("error", "stopped before a machine claimed it: changed my mind")
    assert session.status == "error"
    assert not LedgerEntry.objects.filter(org=funded.org, kind="agent").exists()


def test_deleting_the_machine_records_its_waiting_runs_as_errors(funded, agent, live_machine):
    target_id, _ = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    assert funded.client.delete(f"/v1/agents/targets/{target_id}").status_code == 200
    with funded.context():
        row = Run.objects.get(pk=started["id"])
    assert (row.status, row.error) == ("error", "the target was deleted")


def test_a_claimed_run_never_reported_is_given_up_at_the_machines_next_claim(funded, agent, live_machine, settings):
    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    assert claim(funded, target_id, key).status_code == 200
    limit = settings.AGENTS_ROUTED_RUN_TIMEOUT_SECONDS + 60
    with funded.context():
        RoutedRun.objects.filter(pk=started["id"]).update(claimed_at=timezone.now() - timedelta(seconds=limit + 1))
    assert claim(funded, target_id, key).status_code == 204
    with funded.context():
        row = Run.objects.get(pk=started["id"])
    assert row.status == "error" and row.error == "the machine did not report the run in time"
    assert report(funded, target_id, started["id"], key, {"status": "ok", "output": "late"}).json() == {"delivered": False}


def test_the_sweep_ends_a_run_whose_machine_died_holding_it_even_if_it_never_returns(funded, agent, live_machine, settings):
    """Claimed, never reported, the machine gone for good: the minute's sweep ends it `error`, unbilled."""
    from agents import tasks

    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    assert claim(funded, target_id, key).status_code == 200
    deadline = settings.AGENTS_ROUTED_RUN_TIMEOUT_SECONDS + settings.AGENTS_ROUTED_RUN_GRACE_SECONDS
    with funded.context():
        RoutedRun.objects.filter(pk=started["id"]).update(claimed_at=timezone.now() - timedelta(seconds=deadline - 5))
    assert tasks.sweep()["routedExpired"] == 0  # still within its time plus grace
    with funded.context():
        RoutedRun.objects.filter(pk=started["id"]).update(claimed_at=timezone.now() - timedelta(seconds=deadline + 1))
    assert tasks.sweep()["routedExpired"] == 1
    with funded.context():
        row = Run.objects.get(pk=started["id"])
        offer = RoutedRun.objects.get(pk=started["id"])
        session = Session.objects.get(pk=started["sessionId"])
    assert (row.status, row.error, offer.state, session.status) == ("error", "the machine did not report the run in time", "withdrawn", "error")
    assert not LedgerEntry.objects.filter(org=funded.org, kind="agent").exists()
    assert tasks.sweep()["routedExpired"] == 0  # ended once


def test_a_report_may_name_the_routed_run_by_its_session_id(funded, agent, live_machine):
    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    assert claim(funded, target_id, key).status_code == 200
    answer = report(funded, target_id, started["sessionId"], key, {"status": "ok", "output": "done", "model": "m1"})
    assert (answer.status_code, answer.json()) == (200, {"delivered": True})
    with funded.context():
        row = Run.objects.get(pk=started["id"])
    assert (row.status, row.output, row.model) == ("ok", "done", "m1")
    assert [e.run_id for e in LedgerEntry.objects.filter(org=funded.org, kind="agent")] == [started["id"]]
    again = report(funded, target_id, started["sessionId"], key, {"status": "ok", "output": "twice"})
    assert again.json() == {"delivered": False}


def test_a_claimed_run_within_its_time_is_not_given_up(funded, agent, live_machine):
    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    claim(funded, target_id, key)
    claim(funded, target_id, key)
    with funded.context():
        assert Run.objects.get(pk=started["id"]).status == "running"


# --- idempotency and the server's own loop ------------------------------------------------


def test_an_idempotency_key_replays_the_routed_run_once_it_finished(funded, agent, live_machine):
    target_id, key = live_machine
    first = run(funded, {"input": "go", "targetId": target_id}, **{"Idempotency-Key": "k1"})
    assert first.status_code == 202
    busy = run(funded, {"input": "go", "targetId": target_id}, **{"Idempotency-Key": "k1"})
    # Like a background run: the replay of a run still on the machine is its 202 again.
    assert (busy.status_code, busy.json()["id"], busy["Idempotent-Replayed"]) == (202, first.json()["id"], "true")
    claim(funded, target_id, key)
    report(funded, target_id, first.json()["id"], key, {"status": "ok", "output": "done"})
    again = run(funded, {"input": "go", "targetId": target_id}, **{"Idempotency-Key": "k1"})
    assert again.status_code == 200 and again.json()["id"] == first.json()["id"] and again["Idempotent-Replayed"] == "true"
    assert len(stored(funded)["runs"]) == 1


def test_the_servers_own_loop_lists_shell_as_a_machine_only_tool(funded, agent, upstream):
    upstream.script()
    r = funded.client.post("/v1/agents/builder/run", {"input": "hi"}, content_type="application/json")
    assert r.status_code == 200
    assert [t["function"]["name"] for t in upstream.chat_requests[0]["tools"]] == ["calculator"]
    logs = [p["text"] for kind, p in events(funded, r.json()["sessionId"]) if kind == "log" and "text" in p]
    assert "tool shell not offered: runs only on a registered machine (route the run with targetId)" in logs


def test_a_stop_withdraws_an_unclaimed_offer_at_once_and_frees_its_fee_hold(org_a, agent, live_machine):
    """No claim is needed: the run is an error right after the stop, and a 1-fee org can run again."""
    from billing.services import credit_add

    credit_add(org=org_a.org, cents=100, actor="test")
    target_id, _ = live_machine
    started = run(org_a, {"input": "go", "targetId": target_id}).json()
    stop = org_a.client.post(f"/v1/agents/sessions/{started['sessionId']}/stop", {"message": "changed my mind"}, content_type="application/json")
    assert stop.status_code == 200 and stop.json()["forwarded"] is True
    with org_a.context():
        row = Run.objects.get(pk=started["id"])
        offer = RoutedRun.objects.get(pk=started["id"])
        session = Session.objects.get(pk=started["sessionId"])
    assert offer.state == "withdrawn"
    assert (row.status, row.error) == ("error", "stopped before a machine claimed it: changed my mind")
    assert session.status == "error"
    assert run(org_a, {"input": "again", "targetId": target_id}).status_code == 202
    assert not LedgerEntry.objects.filter(org=org_a.org, kind="agent").exists()


def test_a_report_of_a_run_the_platform_already_finished_is_not_delivered(funded, agent, live_machine):
    """Recovery ended the run "worker lost" while the machine held it: the late report moves nothing."""
    from runs.lifecycle import Outcome, run_finish

    target_id, key = live_machine
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    claim(funded, target_id, key)
    with funded.context():
        assert run_finish(run_id=started["id"], outcome=Outcome.failed("worker lost"), from_statuses=frozenset({"running"}))
    assert report(funded, target_id, started["id"], key, {"status": "ok", "output": "late", "model": "m1"}).json() == {"delivered": False}
    with funded.context():
        row = Run.objects.get(pk=started["id"])
    assert (row.status, row.error, row.output) == ("error", "worker lost", "")
    assert not LedgerEntry.objects.filter(org=funded.org, kind="agent").exists()


def _ruled_run(funded, target_id, key):
    """A routed run of `builder` (its `shell` calls need approval) claimed, its machine having
    posted a reply and reported the turn waiting: `(started, waiting_report_answer)`."""
    ruled = funded.client.patch("/v1/agents/builder", {"approval": {"tools": ["shell"]}}, content_type="application/json")
    assert ruled.status_code == 200, ruled.content
    started = run(funded, {"input": "ship it", "targetId": target_id}).json()
    claimed = claim(funded, target_id, key).json()
    assert claimed["approval"] == {"tools": ["shell"]} and "resume" not in claimed
    posted = funded.client.post(f"/v1/agents/sessions/{started['sessionId']}/events",
                                {"events": [{"kind": "message", "payload": {"role": "user", "text": "ship it", "runId": started["id"]}},
                                            {"kind": "message", "payload": {"role": "assistant", "text": "I will check first.", "runId": started["id"]}}]},
                                content_type="application/json")
    assert posted.status_code in (200, 201), posted.content
    waiting = {"status": "waiting", "model": "local-llm", "promptTokens": 10, "completionTokens": 3, "toolCalls": 0,
               "waiting": {"round": 1, "calls": [{"toolCallId": "call_sh", "name": "shell", "arguments": '{"command": "make ship"}'},
                                                 {"toolCallId": "call_calc", "name": "calculator", "arguments": '{"expression": "1+1"}'}]}}
    return started, report(funded, target_id, started["id"], key, waiting)


def test_a_routed_run_with_approval_rules_waits_without_holding_its_claim(funded, agent, live_machine, settings):
    """Issue 28 item 7: the machine reports the turn `waiting`; the run, its session and its
    requests are exactly a server run's, and the offer is no longer claimed by anyone."""
    settings.INFERENCE_BASE_URL = ""
    target_id, key = live_machine
    started, answered = _ruled_run(funded, target_id, key)
    assert answered.status_code == 200 and answered.json() == {"delivered": True}
    polled = funded.client.get(f"/v1/agents/runs/{started['id']}").json()
    assert polled["status"] == "waiting"
    assert [(a["toolCallId"], a["tool"], a["needsApproval"], a["state"]) for a in polled["approvals"]] == [
        ("call_sh", "shell", True, "pending"), ("call_calc", "calculator", False, "waiting")]
    session = funded.client.get(f"/v1/agents/sessions/{started['sessionId']}").json()
    assert session["status"] == "paused" and [p["toolCallId"] for p in session["pendingApprovals"]] == ["call_sh"]
    [offer] = stored(funded)["offers"]
    assert (offer.state, offer.claimed_at) == ("waiting", None)  # no claim held while a person decides
    assert claim(funded, target_id, key).status_code == 204  # nothing to claim meanwhile
    resumed = funded.client.post(f"/v1/agents/sessions/{started['sessionId']}/resume", {}, content_type="application/json")
    assert resumed.status_code == 409 and resumed.json()["code"] == "approval_pending"
    assert not LedgerEntry.objects.filter(org=funded.org, kind="agent").exists()


def test_an_approved_routed_run_is_claimed_again_with_the_rebuilt_conversation_and_settles_once(funded, agent, live_machine, settings):
    from runs.models import Approval

    settings.INFERENCE_BASE_URL = ""
    target_id, key = live_machine
    started, _ = _ruled_run(funded, target_id, key)
    approved = funded.client.post(f"/v1/agents/sessions/{started['sessionId']}/approve",
                                  {"toolCallId": "call_sh", "arguments": {"command": "make ship-it"}}, content_type="application/json")
    assert approved.status_code == 200 and approved.json()["forwarded"] is True
    assert stored(funded)["offers"][0].state == "offered"
    claimed = claim(funded, target_id, key)
    assert claimed.status_code == 200
    resume = claimed.json()["resume"]
    assert resume["round"] == 1 and resume["usage"] == {"promptTokens": 10, "completionTokens": 3, "toolCalls": 0}
    assert resume["messages"] == [
        {"role": "system", "content": "Build it."}, {"role": "user", "content": "ship it"},
        {"role": "assistant", "content": "I will check first.", "tool_calls": [
            {"id": "call_sh", "type": "function", "function": {"name": "shell", "arguments": '{"command": "make ship-it"}'}},  # as edited, like a server resume
            {"id": "call_calc", "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'}}]}]
    assert resume["calls"] == [{"toolCallId": "call_sh", "name": "shell", "execute": True, "arguments": '{"command": "make ship-it"}'},
                               {"toolCallId": "call_calc", "name": "calculator", "execute": True, "arguments": '{"expression": "1+1"}'}]
    with funded.context():
        assert Run.objects.get(pk=started["id"]).status == "running"
        assert Session.objects.get(pk=started["sessionId"]).status == "running"
        assert sorted(Approval.objects.filter(run_id=started["id"]).values_list("state", flat=True)) == ["started", "started"]
    assert claim(funded, target_id, key).status_code == 204  # taken once
    done = {"status": "ok", "output": "shipped", "model": "local-llm", "promptTokens": 25, "completionTokens": 8, "toolCalls": 2}
    assert report(funded, target_id, started["id"], key, done).json() == {"delivered": True}
    with funded.context():
        row = Run.objects.get(pk=started["id"])
        assert sorted(Approval.objects.filter(run_id=row.id).values_list("state", flat=True)) == ["done", "done"]
    assert (row.status, row.output, row.prompt_tokens, row.tool_calls) == ("ok", "shipped", 25, 2)
    assert [d.run_id for d in LedgerEntry.objects.filter(org=funded.org, kind="agent")] == [row.id]


def test_a_denied_routed_call_comes_back_with_the_reason_and_is_not_to_be_executed(funded, agent, live_machine, settings):
    settings.INFERENCE_BASE_URL = ""
    target_id, key = live_machine
    started, _ = _ruled_run(funded, target_id, key)
    denied = funded.client.post(f"/v1/agents/sessions/{started['sessionId']}/deny", {"toolCallId": "call_sh", "message": "not on a Friday"},
                                content_type="application/json")
    assert denied.status_code == 200
    calls = claim(funded, target_id, key).json()["resume"]["calls"]
    assert calls[0]["execute"] is False and "arguments" not in calls[0]
    assert calls[0]["result"].startswith("The tool call was not executed: denied by") and calls[0]["result"].endswith(": not on a Friday.")
    assert calls[1]["execute"] is True  # the call that needed no approval runs


def test_a_stop_while_a_routed_run_waits_ends_it_and_withdraws_its_offer(funded, agent, live_machine, settings):
    settings.INFERENCE_BASE_URL = ""
    target_id, key = live_machine
    started, _ = _ruled_run(funded, target_id, key)
    stopped = funded.client.post(f"/v1/agents/sessions/{started['sessionId']}/stop", {"message": "never mind"}, content_type="application/json")
    assert stopped.status_code == 200 and stopped.json()["forwarded"] is True
    with funded.context():
        row = Run.objects.get(pk=started["id"])
    assert (row.status, row.finish_reason) == ("error", "stopped") and "never mind" in row.error
    assert stored(funded)["offers"][0].state == "withdrawn"
    assert claim(funded, target_id, key).status_code == 204
    late = {"status": "ok", "output": "late", "model": "m1"}
    assert report(funded, target_id, started["id"], key, late).json() == {"delivered": False}
    assert not LedgerEntry.objects.filter(org=funded.org, kind="agent").exists()


def test_a_waiting_report_naming_no_ruled_call_is_refused_and_the_claim_stays(funded, agent, live_machine, settings):
    settings.INFERENCE_BASE_URL = ""
    target_id, key = live_machine
    funded.client.patch("/v1/agents/builder", {"approval": {"tools": ["shell"]}}, content_type="application/json")
    started = run(funded, {"input": "go", "targetId": target_id}).json()
    claim(funded, target_id, key)
    bad = report(funded, target_id, started["id"], key, {"status": "waiting", "waiting": {"round": 1, "calls": [
        {"toolCallId": "c1", "name": "calculator", "arguments": "{}"}]}})
    assert bad.status_code == 400 and "needs approval" in bad.json()["error"]
    malformed = report(funded, target_id, started["id"], key, {"status": "waiting", "waiting": {"round": 1, "calls": []}})
    assert malformed.status_code == 400
    [offer] = stored(funded)["offers"]
    assert offer.state == "claimed" and stored(funded)["runs"][0].status == "running"
