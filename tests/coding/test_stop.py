"""A stop interrupts a coding run's running command (issue 25): the sandboxed command's whole
process tree is killed, no tool result is recorded for it (what it printed is kept, masked, in
the run's end), the run ends `stopped`, and nothing is pushed unless the stop says `{"push": true}`."""

from __future__ import annotations

import json
import os

import pytest

from coding.sandbox import get_sandbox
from sessions.models import Event
from tests.runs.test_run_session import Steer, session_status
from tests.coding.conftest import execute, git, start
from tests.support.qcluster import wait_for
from tests.support.upstream import Reply
from tests.toolkit.test_sandbox import descendants, running

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed"),
]


SECRET = "AKIA" + "QWERTYUIOPASDFGH"


def sleeping_run(upstream, command: str = "echo started; sleep 60; echo never") -> None:
    upstream.script(
        Reply(content="Add a", tool_calls=[("write_file", {"path": "a.txt", "content": "a\n"})]),
        Reply(content="Test it", tool_calls=[("run", {"command": command})]),
        Reply(content="never", tool_calls=[("finish", {"summary": "never"})]),
    )


def stop_during_the_command(org, upstream, **body) -> tuple[Steer, dict]:
    """Start the steering thread: once `sleep 60` runs in the sandbox, record its tree and post stop."""
    before = descendants(os.getpid())
    seen: dict = {}

    def script(sid, steer):
        seen["tree"] = wait_for(lambda: (found := descendants(os.getpid(), besides=before))
                                and any(name == "sleep" for name, _ in found.values()) and found, timeout=60, message="sleep to run")
        steer.post(sid, "stop", **body)

    steer = Steer(org, script)
    steer.start()
    return steer, seen


def summary_and_later(org, session_id: str) -> tuple[list[dict], dict]:
    with org.context():
        rows = [(e.seq, e.kind, json.loads(e.payload or "null")) for e in Event.objects.filter(session_id=session_id).order_by("seq")]
    [stop_seq] = [seq for seq, kind, payload in rows if kind == "control" and payload["command"] == "stop"]
    later = [{"kind": kind, "payload": payload} for seq, kind, payload in rows if seq > stop_seq]
    tools = [payload for _, kind, payload in rows if kind == "tool-call"]
    return later, {"tools": tools}


def test_a_stop_kills_the_running_command_and_records_no_result_for_it(shop, remote, upstream):
    sleeping_run(upstream, f"echo started {SECRET}; sleep 60; echo never")
    body = start(shop).json()
    steer, seen = stop_during_the_command(shop, upstream)
    assert execute(shop, body["runId"]) == "error"
    steer.finish()

    tree = seen["tree"]
    assert {"bwrap", "sleep"} <= {name for name, _ in tree.values()}
    wait_for(lambda: not any(running(pid, start) for pid, (_, start) in tree.items()), timeout=30, message="the tree to be gone")
    assert len(upstream.chat_requests) == 2  # the third turn never started
    later, recorded = summary_and_later(shop, body["sessionId"])
    assert [e["kind"] for e in later] == ["log"]  # only the run's end after the stop
    final = later[0]["payload"]
    assert final["error"].startswith("stopped by ") and final["pushed"] is False
    masked = "[redacted:aws-access-key-id:a93e68f8176a]"  # what it printed is kept, masked
    assert final["stoppedCommand"] == {"name": "run", "command": f"echo started {masked}; sleep 60; echo never", "output": f"started {masked}\n"}
    with shop.context():
        assert not Event.objects.filter(session_id=body["sessionId"], payload__contains=SECRET).exists()
    assert [t["name"] for t in recorded["tools"]] == ["write_file"]  # no result for the killed command
    assert [c["subject"] for c in final["commits"]] == ["Add a"]
    assert body["branch"] not in git("--git-dir", str(remote), "branch", "--list")
    view = shop.client.get(f"/v1/agents/runs/{body['runId']}").json()
    assert view["finishReason"] == "stopped"
    assert session_status(shop, body["sessionId"]) == "error"


def test_a_stop_that_says_push_pushes_the_commits_made_before_it(shop, remote, upstream):
    sleeping_run(upstream)
    body = start(shop).json()
    steer, _ = stop_during_the_command(shop, upstream, push=True)
    assert execute(shop, body["runId"]) == "error"
    steer.finish()

    later, _ = summary_and_later(shop, body["sessionId"])
    final = later[-1]["payload"]
    assert final["pushed"] is True and [c["subject"] for c in final["commits"]] == ["Add a"]
    assert body["branch"] in git("--git-dir", str(remote), "branch", "--list")
    with shop.context():
        [stop] = [json.loads(e.payload) for e in Event.objects.filter(session_id=body["sessionId"], kind="control")]
    assert stop == {"command": "stop", "push": True}


def test_push_must_be_a_boolean(shop, upstream):
    upstream.script(Reply(content="done"))
    body = start(shop).json()
    refused = shop.client.post(f"/v1/agents/sessions/{body['sessionId']}/stop", {"push": "yes"}, content_type="application/json")
    assert refused.status_code == 400 and refused.json()["error"] == "push must be true or false"
    with shop.context():
        assert not Event.objects.filter(session_id=body["sessionId"], kind="control").exists()


def test_pause_lets_the_running_command_finish_and_holds_before_the_next_turn(shop, remote, upstream):
    """Issue 25 item 2: `pause` never interrupts. Posted while `run` executes, the command runs to
    its end and its result is recorded after the pause; the run then holds (session `paused`,
    no model request) until `resume`, and finishes."""
    upstream.script(
        Reply(content="Wait", tool_calls=[("run", {"command": "echo started; sleep 3; echo finished"})]),
        Reply(tool_calls=[("finish", {"summary": "waited"})]),
    )
    body = start(shop).json()
    before = descendants(os.getpid())
    seen: dict = {}

    def script(sid, steer):
        wait_for(lambda: (found := descendants(os.getpid(), besides=before)) and any(name == "sleep" for name, _ in found.values()),
                 timeout=60, message="the command to run")
        steer.post(sid, "pause")
        wait_for(lambda: session_status(shop, sid) == "paused", timeout=60, message="the run to hold")
        seen["requests while paused"] = len(upstream.chat_requests)
        steer.post(sid, "resume")

    steer = Steer(shop, script)
    steer.start()
    assert execute(shop, body["runId"]) == "ok"
    steer.finish()

    assert seen == {"requests while paused": 1}  # held before the next turn's model call
    assert len(upstream.chat_requests) == 2
    with shop.context():
        rows = [(e.kind, json.loads(e.payload or "null")) for e in Event.objects.filter(session_id=body["sessionId"]).order_by("seq")]
    order = [("control", p["command"]) if k == "control" else (k, p.get("name") or p.get("text")) for k, p in rows]
    pause, result = order.index(("control", "pause")), order.index(("tool-call", "run"))
    assert pause < result < order.index(("log", "run paused")) < order.index(("control", "resume")) < order.index(("log", "run resumed"))
    [run_call] = [p for k, p in rows if k == "tool-call" and p["name"] == "run"]
    assert run_call["error"] is False and run_call["result"] == "started\nfinished\n[exit code 0]"  # the command ran to its end
