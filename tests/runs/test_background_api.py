"""Background runs over HTTP (issue 6 item 1): 202 at once, executed by a task, task-backed.

The task is executed in-process here (`runs.tasks.execute_run`, exactly what a django-q2
worker calls); `test_background_cluster.py` runs it in real `qcluster` processes.
"""

from __future__ import annotations

import json

import pytest

from runs import tasks
from runs.background import CANCELLED_BEFORE_START
from runs.models import Run
from agents_site.vocabulary import RunStatus, SessionStatus
from sessions.models import Event, Session
from tests.agents.conftest import debits, fund, make_agent, stored_runs
from tests.support.task_queue import TaskQueue, task_queue  # noqa: F401  (fixture)
from tests.support.upstream import Reply

pytestmark = pytest.mark.both_stores


def _submit(org, ref: str = "helper", text: str = "hello", **headers):
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    body = {"input": text, **({} if "Prefer" in headers else {"background": True})}
    return org.client.post(f"/v1/agents/{ref}/run", json.dumps(body), content_type="application/json", **extra)


def _execute(org, run_id: str) -> str:
    """Run the queue's task for `run_id` as a worker would."""
    return tasks.execute_run(org.slug, run_id)


def _session(org, session_id) -> tuple[Session, list[tuple[str, dict]]]:
    with org.context():
        session = Session.objects.get(pk=session_id)
        events = [(e.kind, json.loads(e.payload or "null")) for e in Event.objects.filter(session_id=session_id).order_by("seq")]
    return session, events


@pytest.fixture(autouse=True)
def _empty_queue(task_queue):
    """Every test starts with an empty broker queue (a Redis list outlives a test)."""


def _queued_task_ids() -> list[str]:
    return TaskQueue().ids("runs.tasks.execute_run")


def test_background_run_answers_202_at_once_with_run_and_session(funded, upstream):
    make_agent(funded)

    response = _submit(funded)

    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"runId", "sessionId"}
    assert response["Location"] == f"/v1/agents/runs/{body['runId']}" and response["Preference-Applied"] == "respond-async"
    assert upstream.chat_requests == []  # nothing executed yet
    (run,) = stored_runs(funded)
    assert (run.id, run.status, run.input, run.session_id) == (body["runId"], RunStatus.QUEUED, "hello", body["sessionId"])
    session, events = _session(funded, body["sessionId"])
    assert session.task_workflow_id == _queued_task_ids()[0] and session.task_run_id == run.id
    assert session.status == SessionStatus.RUNNING and events == []
    view = funded.client.get(f"/v1/agents/runs/{run.id}").json()
    assert (view["status"], view["sessionId"]) == ("queued", body["sessionId"]) and "startedAt" not in view
    # The history routes list runs that happened: not this one yet.
    assert funded.client.get("/v1/agents/helper/runs").json() == {"runs": []}
    assert funded.client.get("/v1/agents/runs").json() == {"runs": []}
    assert debits(funded) == []


def test_prefer_respond_async_queues_the_run_too(funded, upstream):
    make_agent(funded)

    response = _submit(funded, Prefer="wait=10, respond-async")

    assert response.status_code == 202
    assert stored_runs(funded)[0].status == RunStatus.QUEUED


def test_the_task_executes_the_run_through_the_run_path_in_its_session(funded, upstream):
    make_agent(funded, instructions="Be brief.")
    upstream.script(Reply(content="done in the background"))
    accepted = _submit(funded).json()

    status = _execute(funded, accepted["runId"])

    assert status == RunStatus.OK
    view = funded.client.get(f"/v1/agents/runs/{accepted['runId']}").json()
    assert (view["status"], view["output"], view["sessionId"]) == ("ok", "done in the background", accepted["sessionId"])
    assert view["startedAt"] and view["actor"] == f"{funded.slug}/{funded.user.username}"
    assert [d.run_id for d in debits(funded)] == [accepted["runId"]]
    session, events = _session(funded, accepted["sessionId"])
    assert session.status == SessionStatus.DONE
    assert events[-1][0] == "log" and events[-1][1]["status"] == "ok"
    assert [r["id"] for r in funded.client.get("/v1/agents/helper/runs").json()["runs"]] == [accepted["runId"]]
    with funded.context():
        assert Session.objects.count() == 1  # the run used the session it was accepted with


def test_a_task_delivered_twice_executes_the_run_once(funded, upstream):
    make_agent(funded)
    accepted = _submit(funded).json()

    assert _execute(funded, accepted["runId"]) == RunStatus.OK
    assert _execute(funded, accepted["runId"]) == RunStatus.OK

    assert len(upstream.chat_requests) == 1
    assert len(debits(funded)) == 1


def test_stop_on_a_queued_run_cancels_it_without_a_debit_or_a_model_call(funded, upstream):
    make_agent(funded)
    accepted = _submit(funded).json()

    stopped = funded.client.post(f"/v1/agents/sessions/{accepted['sessionId']}/stop", json.dumps({"message": "never mind"}), content_type="application/json")
    late = _execute(funded, accepted["runId"])  # the worker dequeues it afterwards

    assert stopped.status_code == 200 and stopped.json()["forwarded"] is True
    assert late == RunStatus.ERROR
    view = funded.client.get(f"/v1/agents/runs/{accepted['runId']}").json()
    assert (view["status"], view["error"]) == ("error", f"{CANCELLED_BEFORE_START}: never mind")  # the stop's message is the reason
    assert upstream.chat_requests == []
    assert debits(funded) == []
    session, events = _session(funded, accepted["sessionId"])
    assert session.status == SessionStatus.ERROR
    assert [k for k, _ in events] == ["control", "log"] and events[0][1] == {"command": "stop", "message": "never mind"}


def test_commands_sent_while_queued_reach_the_run_when_it_starts(funded, upstream):
    make_agent(funded)
    accepted = _submit(funded, text="write a haiku").json()

    told = funded.client.post(f"/v1/agents/sessions/{accepted['sessionId']}/message", json.dumps({"message": "in French, please"}), content_type="application/json")
    _execute(funded, accepted["runId"])

    assert told.status_code == 200 and told.json()["forwarded"] is True
    (request,) = upstream.chat_requests
    assert [m["content"] for m in request["messages"] if m["role"] == "user"][-2:] == ["write a haiku", "in French, please"]


def test_an_unfunded_org_is_refused_402_before_anything_is_queued(org_a, upstream):
    make_agent(org_a)

    response = _submit(org_a)

    assert response.status_code == 402 and response.json()["code"] == "insufficient_balance"
    assert stored_runs(org_a) == [] and _queued_task_ids() == []
    with org_a.context():
        assert Session.objects.count() == 0


def test_queued_runs_hold_their_fee_at_the_gate(org_a, upstream):
    fund(org_a, 100)  # one run's fee
    make_agent(org_a)

    first, second = _submit(org_a), _submit(org_a, text="again")

    assert (first.status_code, second.status_code) == (202, 402)
    assert len(stored_runs(org_a)) == 1


def test_a_run_the_balance_no_longer_covers_ends_not_started_without_a_model_call(org_a, upstream):
    fund(org_a, 100)
    make_agent(org_a)
    accepted = _submit(org_a).json()
    from billing.services import run_debit

    run_debit(org=org_a.org, run_id="run_elsewhere", cents=100, model="m", actor="x")  # spent meanwhile

    assert _execute(org_a, accepted["runId"]) == RunStatus.ERROR

    view = org_a.client.get(f"/v1/agents/runs/{accepted['runId']}").json()
    assert view["error"].startswith("not started: ")
    assert upstream.chat_requests == [] and [d.run_id for d in debits(org_a)] == ["run_elsewhere"]
    assert _session(org_a, accepted["sessionId"])[0].status == SessionStatus.ERROR


def test_reading_another_orgs_run_is_404_like_a_missing_one(funded, org_b, upstream):
    make_agent(funded)
    run_id = _submit(funded).json()["runId"]

    foreign = org_b.client.get(f"/v1/agents/runs/{run_id}")
    missing = funded.client.get("/v1/agents/runs/run_" + "0" * 32)

    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json() == {"status": 404, "code": "not_found", "error": "run not found"}


def test_the_same_idempotency_key_answers_the_same_queued_run(funded, upstream):
    make_agent(funded)

    first = _submit(funded, **{"Idempotency-Key": "k-1"})
    again = _submit(funded, **{"Idempotency-Key": "k-1"})
    other = _submit(funded, text="different", **{"Idempotency-Key": "k-1"})

    assert (first.status_code, again.status_code, other.status_code) == (202, 202, 409)
    assert again.json() == first.json() and again["Idempotent-Replayed"] == "true"
    assert len(stored_runs(funded)) == 1 and len(_queued_task_ids()) == 1


def test_bad_background_requests_record_nothing(funded, upstream, settings):
    make_agent(funded)

    too_large = _submit(funded, text="x" * (128 * 1024 + 1))
    settings.INFERENCE_BASE_URL = ""
    no_inference = _submit(funded)
    unknown = _submit(funded, ref="nobody")

    assert (too_large.status_code, no_inference.status_code, unknown.status_code) == (400, 503, 404)
    assert too_large.json()["error"] == "input too large"
    assert stored_runs(funded) == [] and _queued_task_ids() == []


def test_an_agent_named_runs_before_the_name_was_reserved_keeps_its_routes(funded, upstream):
    from django.utils import timezone

    from agents.models import Agent

    with funded.context():  # `runs` is refused today (tests/agents/test_names.py); older rows may hold it
        now = timezone.now()
        Agent.objects.create(id="agent_" + "0" * 32, name="runs", model="test-model", created_at=now, updated_at=now)

    ran = funded.client.post("/v1/agents/runs/run", json.dumps({"input": "hi"}), content_type="application/json")
    history = funded.client.get("/v1/agents/runs/runs")

    assert ran.status_code == 200
    assert [r["id"] for r in history.json()["runs"]] == [ran.json()["id"]]
    with funded.context():
        assert Run.objects.get().status == RunStatus.OK


@pytest.mark.parametrize("background", ["yes", "true", 1, 0, "no", [], {}])
def test_background_must_be_a_json_boolean(funded, upstream, background):
    # `"background": "yes"` once started a billed background run.
    make_agent(funded)
    response = funded.client.post("/v1/agents/helper/run", json.dumps({"input": "hi", "background": background}), content_type="application/json")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request" and body["fields"][0]["field"].endswith("background")
    assert stored_runs(funded) == [] and _queued_task_ids() == [] and upstream.chat_requests == [] and debits(funded) == []
