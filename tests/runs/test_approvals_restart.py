"""A run waiting for approval survives killing every server process (issue 28 item 4): real daphne and
`manage.py qcluster` processes, SIGKILLed while the run waits, restarted, then the approval —
the run finishes once, with one execution of the tool and one debit."""

from __future__ import annotations

import json

import httpx
import pytest

from runs.models import Run
from agents_site.vocabulary import EventKind, RunStatus
from sessions.models import Event
from tests.agents.conftest import debits, fund, make_agent
from tests.runs.test_background_cluster import _cluster_env
from tests.support.live import LiveServer
from tests.support.qcluster import QCluster, wait_for
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _status(org, run_id) -> str:
    with org.context():
        return Run.objects.get(pk=run_id).status


def test_killing_daphne_and_qcluster_while_a_run_waits_then_approving_finishes_it_once(make_org, upstream):
    org = make_org("restart")
    fund(org, 1000)
    make_agent(org, "careful", tools=["calculator"], approval={"tools": ["calculator"]})
    env = _cluster_env(upstream)
    servers = [LiveServer(env).start(), QCluster(env, name="qcluster-before").start()]
    try:
        api = httpx.Client(base_url=servers[0].url, headers={"Authorization": f"Bearer {org.key}"}, timeout=60)
        upstream.script(Reply(tool_calls=[("calculator", {"expression": "2+3"})]))
        waiting = api.post("/v1/agents/careful/run", json={"input": "add"})
        assert waiting.status_code == 202, waiting.text
        run_id, session_id = waiting.json()["id"], waiting.json()["sessionId"]
        call_id = waiting.json()["approvals"][0]["toolCallId"]

        servers[0].proc.kill()  # SIGKILL every process: nothing of the run lived in them
        servers[1].kill()
        assert _status(org, run_id) == RunStatus.WAITING

        servers = [LiveServer(env).start(), QCluster(env, name="qcluster-after").start()]
        api = httpx.Client(base_url=servers[0].url, headers={"Authorization": f"Bearer {org.key}"}, timeout=60)
        upstream.script(Reply(content="five"))
        approved = api.post(f"/v1/agents/sessions/{session_id}/approve", json={"toolCallId": call_id})
        assert approved.status_code == 200, approved.text
        wait_for(lambda: _status(org, run_id) == RunStatus.OK, timeout=60, message=f"the resume\n{servers[1].log()[-3000:]}")
    finally:
        for server in servers:
            server.stop()

    with org.context():
        executed = [json.loads(e.payload) for e in Event.objects.filter(session_id=session_id, kind=EventKind.TOOL_CALL)]
        assert Run.objects.get(pk=run_id).output == "five"
    assert [(e["name"], e["result"]) for e in executed] == [("calculator", "5")]
    assert len(upstream.chat_requests) == 2  # the turn that asked, the turn after the result
    assert len(debits(org)) == 1


def test_a_worker_killed_mid_tool_leaves_the_call_interrupted_never_run_twice(make_org, upstream):
    """The approved call is `agent_worker` (a nested run whose model call is held): the qcluster
    resuming the run is SIGKILLed while that call runs; the restarted cluster's recovery puts the
    run back to `waiting`, its resume hands the model "interrupted, not re-run", the run ends ok."""
    import threading

    from runs.models import Approval
    from agents_site.vocabulary import ApprovalState

    org = make_org("midtool")
    fund(org, 1000)
    make_agent(org, "worker")
    make_agent(org, "boss", tools=["agent_worker"], approval={"tools": ["agent_*"]})
    env = _cluster_env(upstream)
    released = threading.Event()
    upstream.script(Reply(tool_calls=[("agent_worker", {"input": "do it"})]))
    waiting = org.client.post("/v1/agents/boss/run", json.dumps({"input": "delegate"}), content_type="application/json")
    assert waiting.status_code == 202, waiting.content
    run_id, session_id = waiting.json()["id"], waiting.json()["sessionId"]
    upstream.script(Reply(hold=released, content="too late"))  # the worker's model call, held
    first = QCluster(env, name="qcluster-midtool-first").start()
    second = None
    try:
        approved = org.client.post(f"/v1/agents/sessions/{session_id}/approve",
                                   json.dumps({"toolCallId": waiting.json()["approvals"][0]["toolCallId"]}), content_type="application/json")
        assert approved.status_code == 200
        wait_for(lambda: _started(org, run_id) and len(upstream.chat_requests) == 2, timeout=60,
                 message=f"the approved call to run\n{first.log()[-3000:]}")
        first.kill()  # SIGKILL mid-tool
        released.set()
        upstream.script(Reply(content="the worker was interrupted"))
        second = QCluster(env, name="qcluster-midtool-second").start()  # its start-up recovery finds the lost run
        wait_for(lambda: _status(org, run_id) == RunStatus.OK, timeout=90, message=f"the second resume\n{second.log()[-3000:]}")
    finally:
        released.set()
        first.kill()
        if second is not None:
            second.stop()

    last = upstream.chat_requests[-1]["messages"]
    assert last[-1]["role"] == "tool" and last[-1]["content"].startswith("interrupted, not re-run")
    assert len(upstream.chat_requests) == 3  # the boss's turn, the worker's one call (never again), the boss's answer
    with org.context():
        assert Approval.objects.get(run_id=run_id).state == ApprovalState.INTERRUPTED
    assert len(debits(org)) == 1


def _started(org, run_id) -> bool:
    from runs.models import Approval
    from agents_site.vocabulary import ApprovalState

    with org.context():
        return Approval.objects.filter(run_id=run_id, state=ApprovalState.STARTED).exists()
