"""The runner daemon as a real process against a live daphne and the loopback upstream."""

from __future__ import annotations

import hashlib
import json
import stat
import time

import pytest

from targets.models import ClaimKey, RoutedRun, Target
from tests.runner.conftest import START_SECONDS
from tests.support.live import LiveServer, free_port
from tests.support.upstream import Reply
from tests.targets.conftest import offer

pytestmark = pytest.mark.django_db(transaction=True)


def wait_until(predicate, timeout: float = 120.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def targets_of(handle) -> list[Target]:
    with handle.context():
        return list(Target.objects.all())


def routed(handle, run_id) -> RoutedRun:
    with handle.context():
        return RoutedRun.objects.get(pk=run_id)


def inference_env(upstream) -> dict:
    return {"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "machine-key"}


def test_the_runner_completes_a_routed_run_end_to_end(org_a, daphne_server, upstream, runner_factory, tmp_path):
    import subprocess

    workdir = tmp_path / "work"
    workdir.mkdir()
    git = ["git", "-C", str(workdir), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "feature"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    upstream.script(
        Reply(tool_calls=[("shell", {"command": "echo built > out.txt && cat out.txt"})]),
        Reply(tool_calls=[("calculator", {"expression": "6*7"})]),
        Reply(content="done: 42", prompt_tokens=30, completion_tokens=5),
    )
    runner = runner_factory(daphne_server.url, org_a.key, "--label", "ci box", "--allow-shell", str(workdir), env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    assert target.label == "ci box" and target.owner == org_a.user.username and target.spec["cpus"] >= 1
    payload = {"agent": {"name": "builder", "model": "test-model", "instructions": "Build it.", "tools": ["shell", "calculator", "nope"]},
               "input": "make out.txt"}
    offer(org_a, target.id, run_id="run_e2e", session_id="", payload=payload)
    row = wait_until(lambda: (r := routed(org_a, "run_e2e")).state == "reported" and r, what="the report")
    assert row.result["status"] == "ok" and row.result["output"] == "done: 42"
    assert row.result["toolCalls"] == 2 and row.result["model"] == "test-model"
    assert row.result["promptTokens"] == 11 + 11 + 30 and row.result["completionTokens"] == 7 + 7 + 5
    assert (workdir / "out.txt").read_text() == "built\n"
    # code work: the report carries the working copy's branch, commit and what changed
    assert (row.result["branch"], row.result["commitSha"], row.result["changed"]) == ("feature", head, True)
    assert "out.txt" in row.result["diffstat"]
    first = upstream.chat_requests[0]
    assert first["messages"][0] == {"role": "system", "content": "Build it."}
    assert sorted(t["function"]["name"] for t in first["tools"]) == ["calculator", "shell"]
    tool_result = upstream.chat_requests[1]["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["content"] == "exit 0\nbuilt\n"
    # the routed run carried no credential: the machine used its own gateway key
    assert "machine-key" not in json.dumps(row.payload)
    key_file = next((tmp_path / "keys").glob("*.json"))
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    with org_a.context():
        stored = ClaimKey.objects.get(target_id=target.id)
    assert stored.key_hash == hashlib.sha256(json.loads(key_file.read_text())["claimKey"].encode()).hexdigest()
    assert runner.terminate() == 0


def test_the_runner_heartbeats_and_relinks_with_its_saved_key_on_restart(org_a, daphne_server, runner_factory):
    first = runner_factory(daphne_server.url, org_a.key)
    first.wait_for("claim key minted")
    [target] = targets_of(org_a)
    wait_until(lambda: targets_of(org_a)[0].metrics_at and targets_of(org_a)[0].metrics_at > target.metrics_at, what="a heartbeat")
    with org_a.context():
        hash_before = ClaimKey.objects.get(target_id=target.id).key_hash
    assert first.terminate() == 0
    second = runner_factory(daphne_server.url, org_a.key)
    second.wait_for("claim key loaded")
    second.wait_for("POST")  # it went on to claim
    [again] = targets_of(org_a)
    assert again.id == target.id and again.created_at == target.created_at
    with org_a.context():
        assert ClaimKey.objects.get(target_id=target.id).key_hash == hash_before
    assert second.terminate() == 0


def test_sigterm_during_a_run_reports_it_as_an_error_and_exits_cleanly(org_a, daphne_server, upstream, runner_factory):
    upstream.script(Reply(delay=8.0, content="too late"))
    runner = runner_factory(daphne_server.url, org_a.key, "--stop-grace", "0.3", env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    offer(org_a, target.id, run_id="run_cut", payload={"agent": {"name": "slow", "model": "test-model"}, "input": "wait"})
    runner.wait_for("claimed run run_cut")
    wait_until(lambda: upstream.chat_requests, what="the inference call")
    assert runner.terminate(timeout=60) == 0
    row = routed(org_a, "run_cut")
    assert row.state == "reported" and row.result["status"] == "error"
    assert "stopped" in row.result["error"]


def test_a_superseded_runner_exits_with_code_3(org_a, daphne_server, runner_factory):
    import httpx

    runner = runner_factory(daphne_server.url, org_a.key)
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    rotated = httpx.post(daphne_server.url + f"/v1/agents/targets/{target.id}/key", headers={"Authorization": f"Bearer {org_a.key}"}, timeout=30)
    assert rotated.status_code == 200
    assert runner.proc.wait(timeout=120) == 3
    assert "claim refused" in runner.log()


def test_a_refused_api_key_exits_with_code_2_and_registers_nothing(org_a, daphne_server, runner_factory):
    runner = runner_factory(daphne_server.url, "ak_" + "0" * 48)
    assert runner.proc.wait(timeout=120) == 2
    assert "refused" in runner.log()
    assert targets_of(org_a) == []


def test_the_runner_backs_off_while_the_server_is_down_then_registers(org_a, runner_factory):
    port = free_port()
    # Pauses of at most 1 s: registering then waits on the server being up, not on where the
    # default schedule (doubling to 30 s) stood when daphne answered (a daphne start under load).
    runner = runner_factory(f"http://127.0.0.1:{port}", org_a.key, "--backoff-max", "1")
    runner.wait_for("retrying in")
    assert targets_of(org_a) == []
    server = LiveServer({"AGENTS_CLAIM_WAIT_SECONDS": "1"})
    server.port = port
    server.start(timeout=START_SECONDS)
    try:
        runner.wait_for("claim key minted", timeout=120)
        assert len(targets_of(org_a)) == 1
        assert runner.terminate() == 0
    finally:
        server.stop()


def test_without_allow_shell_the_shell_tool_is_not_offered(org_a, daphne_server, upstream, runner_factory):
    upstream.script(Reply(content="no shell here"))
    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    offer(org_a, target.id, run_id="run_noshell", payload={"agent": {"name": "a", "model": "test-model", "tools": ["shell"]}, "input": "ls"})
    row = wait_until(lambda: (r := routed(org_a, "run_noshell")).state == "reported" and r, what="the report")
    assert row.result["status"] == "ok" and row.result["output"] == "no shell here"
    assert "tools" not in upstream.chat_requests[0]
    assert runner.terminate() == 0


def _events(handle, session_id):
    from sessions.models import Event

    with handle.context():
        return [(e.kind, json.loads(e.payload or "null")) for e in Event.objects.filter(session_id=session_id).order_by("seq")]


def test_the_runner_streams_its_steps_into_the_runs_session(org_a, daphne_server, upstream, runner_factory):
    from sessions.services import session_create

    upstream.script(Reply(tool_calls=[("calculator", {"expression": "2+2"})]), Reply(content="four"))
    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    with org_a.context():
        session = session_create(agent="calc", actor=f"{org_a.slug}/{org_a.user.username}", target=target.id)
    payload = {"agent": {"name": "calc", "model": "test-model", "tools": ["calculator", "current_time_nope"]}, "input": "2+2?"}
    offer(org_a, target.id, run_id="run_stream", session_id=session.id, payload=payload)
    wait_until(lambda: routed(org_a, "run_stream").state == "reported", what="the report")
    events = _events(org_a, session.id)
    assert [kind for kind, _ in events] == ["log", "message", "tool-call", "message"]
    assert events[0][1]["text"].startswith("tool current_time_nope not offered")
    assert events[1][1] == {"role": "user", "text": "2+2?", "runId": "run_stream"}
    assert events[2][1]["name"] == "calculator" and events[2][1]["result"] == "4" and events[2][1]["error"] is False
    # the tool-call event is shaped as the server shapes its own (toolkit.events.tool_call_payload)
    assert events[2][1] == {"name": "calculator", "arguments": {"expression": "2+2"}, "result": "4", "error": False, "round": 1,
                            "toolCallId": events[2][1]["toolCallId"], "runId": "run_stream"} and events[2][1]["toolCallId"]
    assert events[3][1]["text"] == "four" and events[3][1]["runId"] == "run_stream"
    from sessions.models import Event

    with org_a.context():  # the opening turns were posted together: one batch, one transaction, one timestamp
        stamps = list(Event.objects.filter(session_id=session.id).order_by("seq").values_list("created_at", flat=True))
    assert stamps[0] == stamps[1] and len(set(stamps)) == 3
    assert runner.terminate() == 0


def test_a_stop_posted_to_the_session_ends_the_run_on_the_machine_as_an_error(org_a, daphne_server, upstream, runner_factory):
    import httpx
    from sessions.services import session_create

    upstream.script(Reply(delay=1.5, tool_calls=[("calculator", {"expression": "1+1"})]), Reply(content="never"))
    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    with org_a.context():
        session = session_create(agent="calc", actor="x", target=target.id)
    offer(org_a, target.id, run_id="run_stop", session_id=session.id,
          payload={"agent": {"name": "calc", "model": "test-model", "tools": ["calculator"]}, "input": "go"})
    wait_until(lambda: upstream.chat_requests, what="the first step")
    stopped = httpx.post(daphne_server.url + f"/v1/agents/sessions/{session.id}/stop", json={"message": "enough"},
                         headers={"Authorization": f"Bearer {org_a.key}"}, timeout=30)
    assert stopped.status_code == 200
    row = wait_until(lambda: (r := routed(org_a, "run_stop")).state == "reported" and r, what="the report")
    assert row.result["status"] == "error" and row.result["error"] == "stopped: enough"
    assert len(upstream.chat_requests) == 1  # no step after the stop
    assert runner.terminate() == 0


def test_a_run_posted_with_target_id_runs_on_the_machine_end_to_end(org_a, upstream, runner_factory, tmp_path):
    """POST /run with targetId on a live daphne (no gateway of its own) → the runner, using the
    machine's gateway, executes it with a tool and the shell, streams it, reports it; the server
    records the run, closes its session and debits it. The claim window is 60 s: the run's
    arrival within seconds is the in-process wake-up on daphne's own loop."""
    import httpx

    from runs.models import Run
    from billing.models import LedgerEntry
    from billing.services import credit_add
    from sessions.models import Session

    credit_add(org=org_a.org, cents=500, actor="test")
    workdir = tmp_path / "repo"
    workdir.mkdir()
    upstream.script(
        Reply(tool_calls=[("calculator", {"expression": "40+2"})]),
        Reply(tool_calls=[("shell", {"command": "echo 42 > answer.txt && ls"})]),
        Reply(content="wrote answer.txt", prompt_tokens=20, completion_tokens=3),
    )
    auth = {"Authorization": f"Bearer {org_a.key}"}
    server = LiveServer({"AGENTS_CLAIM_WAIT_SECONDS": "60"}).start(timeout=START_SECONDS)
    try:
        created = httpx.post(server.url + "/v1/agents", json={"name": "writer", "model": "test-model", "instructions": "Write files.",
                                                              "tools": ["calculator", "shell"]}, headers=auth, timeout=30)
        assert created.status_code == 201, created.text
        runner = runner_factory(server.url, org_a.key, "--allow-shell", str(workdir), env=inference_env(upstream))
        runner.wait_for("claim key minted")
        [target] = targets_of(org_a)
        wait_until(lambda: (key := _claim_key(org_a, target.id)) and key.serving_at, what="the first claim")
        started = httpx.post(server.url + "/v1/agents/writer/run", json={"input": "compute and write", "targetId": target.id}, headers=auth, timeout=30)
        assert started.status_code == 202, started.text
        run_id, session_id = started.json()["id"], started.json()["sessionId"]

        def finished():
            with org_a.context():
                row = Run.objects.get(pk=run_id)
            return row if row.status != "running" else None

        row = wait_until(finished, timeout=120, what="the routed run to finish")
        runs = httpx.get(server.url + "/v1/agents/writer/runs", headers=auth, timeout=30).json()["runs"]
    finally:
        server.stop()
    assert (row.status, row.output, row.model, row.tool_calls) == ("ok", "wrote answer.txt", "test-model", 2)
    assert (row.prompt_tokens, row.completion_tokens) == (11 + 11 + 20, 7 + 7 + 3)
    assert [(r["id"], r["status"]) for r in runs] == [(run_id, "ok")]
    assert (workdir / "answer.txt").read_text() == "42\n"
    with org_a.context():
        session = Session.objects.get(pk=session_id)
    assert session.status == "done" and session.target == target.id
    kinds = [kind for kind, _ in _events(org_a, session_id)]
    assert kinds == ["message", "tool-call", "tool-call", "message", "log"]
    assert LedgerEntry.objects.get(org=org_a.org, kind="agent").run_id == run_id
    assert runner.terminate() == 0


def _claim_key(handle, target_id):
    with handle.context():
        return ClaimKey.objects.filter(target_id=target_id).first()


def test_a_lone_surrogate_in_the_models_answer_is_replaced_so_the_report_is_taken(org_a, daphne_server, upstream, runner_factory):
    """The server refuses `"\\ud800"` escapes (400); the runner sends valid UTF-8 so the run settles."""
    upstream.script(Reply(content="done \ud800"))
    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    payload = {"agent": {"name": "builder", "model": "test-model", "instructions": "", "tools": []}, "input": "go"}
    offer(org_a, target.id, run_id="run_surrogate", session_id="", payload=payload)
    row = wait_until(lambda: (r := routed(org_a, "run_surrogate")).state == "reported" and r, what="the report")
    assert (row.result["status"], row.result["output"]) == ("ok", "done ?")
    assert runner.terminate() == 0


def test_steering_reaches_the_machine_between_steps_and_a_gateway_refusal_ends_the_run(org_a, daphne_server, upstream, runner_factory):
    """message / pause / resume posted to the session apply on the machine; a 4xx from its gateway ends the run."""
    import threading

    import httpx
    from sessions.services import session_create

    held = threading.Event()
    upstream.script(Reply(hold=held, tool_calls=[("calculator", {"expression": "1+1"})]),
                    Reply(status=400, error_body={"error": {"message": "no such model", "type": "invalid_request_error"}}))
    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    with org_a.context():
        session = session_create(agent="calc", actor="x", target=target.id)
    offer(org_a, target.id, run_id="run_steer", session_id=session.id,
          payload={"agent": {"name": "calc", "model": "test-model", "tools": ["calculator"]}, "input": "go"})
    wait_until(lambda: upstream.chat_requests, what="the first step")
    api = f"{daphne_server.url}/v1/agents/sessions/{session.id}"
    auth = {"Authorization": f"Bearer {org_a.key}"}
    assert httpx.post(api + "/message", json={"message": "also say hi"}, headers=auth, timeout=30).status_code == 200
    assert httpx.post(api + "/pause", json={}, headers=auth, timeout=30).status_code == 200
    held.set()
    wait_until(lambda: any(p.get("text") == "run paused" for _, p in _events(org_a, session.id)), what="the machine to pause")
    assert len(upstream.chat_requests) == 1  # held: no step while paused
    assert httpx.post(api + "/resume", json={}, headers=auth, timeout=30).status_code == 200
    row = wait_until(lambda: (r := routed(org_a, "run_steer")).state == "reported" and r, what="the report")
    assert row.result["status"] == "error" and "the gateway answered 400" in row.result["error"]
    second = upstream.chat_requests[1]["messages"]
    assert {"role": "user", "content": "also say hi"} in second
    texts = [p.get("text") for _, p in _events(org_a, session.id)]
    assert "run paused" in texts and "run resumed" in texts and "also say hi" in texts
    assert runner.terminate() == 0


def test_a_stop_during_a_shell_command_kills_its_tree_and_records_what_it_printed(org_a, daphne_server, upstream, runner_factory, tmp_path):
    """SIGTERM, then the stop grace: the run's task is cancelled, the command and its child are gone,
    its output so far is reported as `stoppedCommand` and no tool result is recorded (issue 25)."""
    from sessions.services import session_create
    from tests.toolkit.test_sandbox import descendants, running

    work = tmp_path / "shell"
    work.mkdir()
    upstream.script(Reply(tool_calls=[("shell", {"command": "echo started; sleep 60 & sleep 61"})]), Reply(content="never"))
    runner = runner_factory(daphne_server.url, org_a.key, "--allow-shell", str(work), "--stop-grace", "0.3", env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    with org_a.context():
        session = session_create(agent="sh", actor="x", target=target.id)
    offer(org_a, target.id, run_id="run_kill", session_id=session.id,
          payload={"agent": {"name": "sh", "model": "test-model", "tools": ["shell"]}, "input": "go"})
    tree = wait_until(lambda: (found := descendants(runner.proc.pid)) and sum(n == "sleep" for n, _ in found.values()) >= 2 and found,
                      what="the command and its child to run")
    assert runner.terminate(timeout=60) == 0
    wait_until(lambda: not any(running(pid, start) for pid, (_, start) in tree.items()), what="the whole tree to be gone")
    row = routed(org_a, "run_kill")
    assert row.state == "reported" and row.result["status"] == "error"
    assert row.result["stoppedCommand"] == {"name": "shell", "command": "echo started; sleep 60 & sleep 61", "output": "started\n"}
    events = _events(org_a, session.id)
    assert not any(kind == "tool-call" for kind, _ in events)
    assert not any(kind == "log" for kind, _ in events)  # what it printed travels in the report, not as a step


def test_a_stop_closes_the_machines_model_call_in_flight_and_it_reports_stopped(org_a, daphne_server, upstream, runner_factory):
    """Issue 25 item 5: the runner watches its run's control channel while the model call runs; the
    stop cancels the request the gateway is still holding (it never answered) and no second
    request follows."""
    import threading

    import httpx
    from sessions.services import session_create

    held = threading.Event()
    upstream.script(Reply(hold=held, content="too late"))
    runner = runner_factory(daphne_server.url, org_a.key, env=inference_env(upstream))
    try:
        runner.wait_for("claim key minted")
        [target] = targets_of(org_a)
        with org_a.context():
            session = session_create(agent="talk", actor="x", target=target.id)
        offer(org_a, target.id, run_id="run_watch", session_id=session.id,
              payload={"agent": {"name": "talk", "model": "test-model"}, "input": "go"})
        wait_until(lambda: upstream.chat_requests, what="the model call")
        stopped = httpx.post(daphne_server.url + f"/v1/agents/sessions/{session.id}/stop", json={"message": "enough"},
                             headers={"Authorization": f"Bearer {org_a.key}"})
        assert stopped.status_code == 200
        row = wait_until(lambda: (r := routed(org_a, "run_watch")).state == "reported" and r, what="the report")
        assert not held.is_set()  # reported while the gateway still held its answer: the call was cancelled
    finally:
        held.set()
    assert row.result["status"] == "error" and row.result["error"] == "stopped: enough" and row.result["finishReason"] == "stopped"
    assert len(upstream.chat_requests) == 1
    assert runner.terminate() == 0


def test_a_stop_kills_the_machines_running_command_and_after_the_stop_the_session_holds_only_the_runs_end(
        org_a, daphne_server, upstream, runner_factory, tmp_path):
    """Issue 25 items 1 and 2 on a machine: a routed run (POST /run with targetId) whose command runs
    when the stop is posted. The stop reaches the runner, the command's tree is gone, no tool
    result is recorded, and after the stop's `control` event the session holds only the run's end:
    the summary `log`, which keeps what the command printed (masked) as `stoppedCommand` — the
    machine posts no event of its own for it."""
    import httpx

    from runs.models import Run
    from billing.services import credit_add
    from tests.agents.conftest import debits
    from tests.toolkit.test_sandbox import descendants, running

    credit_add(org=org_a.org, cents=500, actor="test")
    secret = "AKIA" + "QWERTYUIOPASDFGH"
    work = tmp_path / "shell"
    work.mkdir()
    upstream.script(Reply(tool_calls=[("shell", {"command": f"echo started {secret}; sleep 60 & sleep 61"})]), Reply(content="never"))
    created = org_a.client.post("/v1/agents", {"name": "sh", "model": "test-model", "tools": ["shell"]}, content_type="application/json")
    assert created.status_code == 201, created.content
    runner = runner_factory(daphne_server.url, org_a.key, "--allow-shell", str(work), env=inference_env(upstream))
    runner.wait_for("claim key minted")
    [target] = targets_of(org_a)
    # Routing needs the machine's first claim (`serving_at`): the key is minted before it, and
    # beside a CPU hog the run was posted first (409 "target has not claimed work within 90 s").
    wait_until(lambda: (key := _claim_key(org_a, target.id)) and key.serving_at, what="the first claim")
    started = org_a.client.post("/v1/agents/sh/run", {"input": "go", "targetId": target.id}, content_type="application/json")
    assert started.status_code == 202, started.content
    run_id, session_id = started.json()["id"], started.json()["sessionId"]
    tree = wait_until(lambda: (found := descendants(runner.proc.pid)) and sum(n == "sleep" for n, _ in found.values()) >= 2 and found,
                      what="the command and its child to run")
    stopped = httpx.post(daphne_server.url + f"/v1/agents/sessions/{session_id}/stop", json={},
                         headers={"Authorization": f"Bearer {org_a.key}"})
    assert stopped.status_code == 200
    stop_seq = stopped.json()["event"]["seq"]
    wait_until(lambda: not any(running(pid, start) for pid, (_, start) in tree.items()), what="the whole tree to be gone")

    def finished():
        with org_a.context():
            row = Run.objects.get(pk=run_id)
        return row if row.status != "running" else None

    row = wait_until(finished, what="the run to be settled")
    assert (row.status, row.finish_reason) == ("error", "stopped"), row.error
    assert routed(org_a, run_id).result["stoppedCommand"]["output"] == "started [redacted:aws-access-key-id:a93e68f8176a]\n"
    assert len(upstream.chat_requests) == 1
    events = _events(org_a, session_id)
    assert not any(kind == "tool-call" for kind, _ in events)
    assert events[stop_seq - 1] == ("control", {"command": "stop"})
    after = events[stop_seq:]
    assert [kind for kind, _ in after] == ["log"]  # only the run's end
    assert after[0][1]["runId"] == run_id and after[0][1]["status"] == "error"
    assert after[0][1]["stoppedCommand"] == {"name": "shell", "command": "echo started [redacted:aws-access-key-id:a93e68f8176a]; sleep 60 & sleep 61",
                                            "output": "started [redacted:aws-access-key-id:a93e68f8176a]\n"}
    assert secret not in json.dumps(events)
    assert debits(org_a) == []  # a stopped run stays unbilled
    assert runner.proc.poll() is None  # the daemon goes on: only the run stopped
    assert runner.terminate() == 0
