"""Steering: control commands over HTTP, the control poll, forwarding to a live executor."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import httpx
import pytest

from sessions.bus import reset_bus
from sessions.control import ExecutorInbox, control_send
from sessions.models import Event, Session
from tests.sessions.conftest import new_session, post
from tests.support.live import ROOT, server_env

pytestmark = pytest.mark.both_stores

BASE = "/v1/agents/sessions"


def _controls(org, session_id) -> list[dict]:
    with org.context():
        return [json.loads(p) for p in Event.objects.filter(session_id=session_id, kind="control").order_by("seq").values_list("payload", flat=True)]


@pytest.mark.parametrize("command", ["pause", "resume", "stop", "message"])
def test_a_command_is_recorded_as_a_control_event_and_never_changes_the_status(org_a, command):
    session = new_session(org_a)
    body = {"message": "look at the tests first"} if command == "message" else {}
    response = post(org_a.client, f"{BASE}/{session['id']}/{command}", body)
    assert response.status_code == 200
    answer = response.json()
    assert answer["command"] == command and answer["forwarded"] is False
    assert answer["event"]["kind"] == "control" and answer["event"]["seq"] == 1
    assert answer["event"]["actor"] == f"{org_a.slug}/{org_a.user.username}"
    assert answer["event"]["payload"] == {"command": command, **body}
    assert _controls(org_a, session["id"]) == [{"command": command, **body}]
    with org_a.context():
        assert Session.objects.get(pk=session["id"]).status == "running"


def test_resume_does_not_require_a_paused_session(org_a):
    session = new_session(org_a)
    assert post(org_a.client, f"{BASE}/{session['id']}/resume").status_code == 200


def test_a_command_may_carry_a_payload(org_a):
    session = new_session(org_a)
    response = post(org_a.client, f"{BASE}/{session['id']}/message", {"payload": {"files": ["a.py"]}})
    assert response.status_code == 200 and response.json()["event"]["payload"] == {"command": "message", "payload": {"files": ["a.py"]}}


@pytest.mark.parametrize("body", [{}, {"message": ""}, {"message": None}])
def test_message_needs_a_message_or_a_payload(org_a, body):
    session = new_session(org_a)
    response = post(org_a.client, f"{BASE}/{session['id']}/message", body)
    assert response.status_code == 400
    assert response.json() == {"status": 400, "code": "invalid_request", "error": "message requires a 'message' or 'payload'"}
    assert _controls(org_a, session["id"]) == []


def test_a_message_of_16_kib_is_admitted_and_one_byte_more_is_refused(org_a):
    session = new_session(org_a)
    assert post(org_a.client, f"{BASE}/{session['id']}/message", {"message": "m" * 16384}).status_code == 200
    response = post(org_a.client, f"{BASE}/{session['id']}/message", {"message": "m" * 16385})
    assert response.status_code == 400 and response.json()["error"] == "message too long"
    response = post(org_a.client, f"{BASE}/{session['id']}/pause", {"payload": "p" * (64 * 1024)})
    assert response.status_code == 400 and response.json()["error"] == "payload too large"
    assert len(_controls(org_a, session["id"])) == 1


def test_a_control_payload_and_its_message_are_both_scanned(org_a):
    session = new_session(org_a)
    key = "AKIA" + "QWERTYUIOPASDFGH"
    refused = post(org_a.client, f"{BASE}/{session['id']}/pause", {"payload": {"creds": key}})
    assert refused.status_code == 422 and refused.json()["code"] == "secret_in_transcript"
    assert key not in refused.content.decode()
    assert _controls(org_a, session["id"]) == []
    # Stricter than spec 003 (which leaves the message unscanned): a credential is stored nowhere.
    refused = post(org_a.client, f"{BASE}/{session['id']}/message", {"message": f"rotate {key}"})
    assert refused.status_code == 422 and refused.json()["code"] == "secret_in_transcript"
    assert _controls(org_a, session["id"]) == []


@pytest.mark.parametrize("status", ["done", "error"])
@pytest.mark.parametrize("command", ["pause", "resume", "stop", "message"])
def test_a_finished_session_refuses_every_command(org_a, status, command):
    session = new_session(org_a, status=status)
    response = post(org_a.client, f"{BASE}/{session['id']}/{command}", {"message": "hi"})
    assert response.status_code == 409
    assert response.json() == {"status": 409, "code": "session_finished", "error": f"session is {status}; cannot {command} a finished session"}
    assert _controls(org_a, session["id"]) == []


def test_a_session_finished_while_a_command_is_checked_refuses_it(org_a, monkeypatch):
    """The finished check holds until the command is stored: a run ending meanwhile wins (409)."""
    from sessions import control, services

    session = new_session(org_a)
    scan = services.refuse_secrets

    def finish_then_scan(payload):  # the run reports `done` between the first check and the append
        services.session_update(session_id=session["id"], status="done")
        scan(payload)

    monkeypatch.setattr(control.services, "refuse_secrets", finish_then_scan)
    response = post(org_a.client, f"{BASE}/{session['id']}/pause")
    assert response.status_code == 409
    assert response.json() == {"status": 409, "code": "session_finished", "error": "session is done; cannot pause a finished session"}
    assert _controls(org_a, session["id"]) == []


@pytest.mark.parametrize("body", ['{"message": "\\ud800"}', '{"payload": {"t": "\\udfff"}}', '{"payload": ' + "[" * 5000 + "]" * 5000 + "}"])
def test_a_command_no_store_can_hold_is_400(org_a, body):
    session = new_session(org_a)
    response = post(org_a.client, f"{BASE}/{session['id']}/message", body)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request" and set(response.json()) == {"status", "code", "error"}
    assert _controls(org_a, session["id"]) == []


@pytest.mark.parametrize("command", ["pause", "resume", "stop", "message"])
def test_commands_on_another_orgs_session_are_404(org_a, org_b, command):
    session = new_session(org_b)
    response = post(org_a.client, f"{BASE}/{session['id']}/{command}", {"message": "hi"})
    assert response.status_code == 404 and response.json()["error"] == "session not found"
    assert _controls(org_b, session["id"]) == []


def test_the_control_poll_returns_commands_after_the_cursor_oldest_first(org_a):
    session = new_session(org_a)
    post(org_a.client, f"{BASE}/{session['id']}/events", {"kind": "message", "payload": {"text": "not a command"}})
    post(org_a.client, f"{BASE}/{session['id']}/pause")
    post(org_a.client, f"{BASE}/{session['id']}/message", {"message": "hi", "payload": {"n": 1}})
    everything = org_a.client.get(f"{BASE}/{session['id']}/control").json()
    assert everything == {"commands": [{"seq": 2, "command": "pause"}, {"seq": 3, "command": "message", "message": "hi", "payload": {"n": 1}}], "cursor": 3}
    assert org_a.client.get(f"{BASE}/{session['id']}/control", {"after": 2}).json()["commands"] == everything["commands"][1:]
    assert org_a.client.get(f"{BASE}/{session['id']}/control", {"after": -5}).json() == everything
    assert org_a.client.get(f"{BASE}/{session['id']}/control", {"after": 3}).json() == {"commands": [], "cursor": 3}
    assert org_a.client.get(f"{BASE}/{session['id']}/control", {"after": "x"}).status_code == 400


@pytest.mark.parametrize("after", ["9223372036854775808", "-9223372036854775809", "1" + "0" * 40])
def test_a_control_cursor_beyond_64_bits_is_400(org_a, after):
    session = new_session(org_a)
    response = org_a.client.get(f"{BASE}/{session['id']}/control", {"after": after})
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request" and response.json()["status"] == 400
    assert org_a.client.get(f"{BASE}/{session['id']}/control", {"after": "9223372036854775807"}).json()["commands"] == []


def test_the_control_poll_returns_at_most_200(org_a):
    session = new_session(org_a)
    with org_a.context():
        for _ in range(205):
            control_send(session_id=session["id"], command="pause", actor="t")
    first = org_a.client.get(f"{BASE}/{session['id']}/control").json()
    assert len(first["commands"]) == 200 and first["cursor"] == 200
    second = org_a.client.get(f"{BASE}/{session['id']}/control", {"after": first["cursor"]}).json()
    assert [c["seq"] for c in second["commands"]] == list(range(201, 206)) and second["cursor"] == 205


# --- forwarding to a live executor --------------------------------------------------------


def test_a_live_executor_in_another_thread_takes_the_command(org_a, bus_backend):
    session = new_session(org_a)
    with org_a.context():
        inbox = ExecutorInbox.open(session_id=session["id"])
    try:
        with org_a.context():
            assert Session.objects.get(pk=session["id"]).executor_channel == inbox.channel
        response = post(org_a.client, f"{BASE}/{session['id']}/pause")
        assert response.status_code == 200 and response.json()["forwarded"] is True
        assert inbox.pending() == [{"command": "pause", "message": None, "payload": None, "seq": 1}]
        response = post(org_a.client, f"{BASE}/{session['id']}/message", {"message": "now the docs", "payload": {"p": [1]}})
        assert response.json()["forwarded"] is True
        assert inbox.wait(2) == {"command": "message", "message": "now the docs", "payload": {"p": [1]}, "seq": 2}
        assert inbox.pending() == [] and inbox.wait(0.05) is None
    finally:
        with org_a.context():
            inbox.close()
    with org_a.context():
        assert Session.objects.get(pk=session["id"]).executor_channel == ""
    after = post(org_a.client, f"{BASE}/{session['id']}/stop")
    assert after.status_code == 200 and after.json()["forwarded"] is False
    assert [c["command"] for c in _controls(org_a, session["id"])] == ["pause", "message", "stop"]


def test_every_inbox_of_a_process_shares_one_receiver_and_gets_only_its_own_commands(org_a, bus_backend):
    import threading

    from sessions.control import executor_hub

    executor_hub()  # the process's receiver, started on first use
    sessions = [new_session(org_a) for _ in range(4)]
    before = set(threading.enumerate())
    with org_a.context():
        inboxes = [ExecutorInbox.open(session_id=session["id"]) for session in sessions]
    try:
        # No thread (and no mailbox) per executor. Compared as sets, not counts: the hub of the
        # bus the previous test retired may still be ending (up to its 0.2 s poll).
        assert set(threading.enumerate()) <= before
        assert len({inbox.channel for inbox in inboxes}) == 1
        for n, session in enumerate(sessions):
            response = post(org_a.client, f"{BASE}/{session['id']}/message", {"message": f"for {n}"})
            assert response.status_code == 200 and response.json()["forwarded"] is True
        for n, inbox in enumerate(inboxes):
            assert inbox.wait(2)["message"] == f"for {n}"
            assert inbox.pending() == []
    finally:
        with org_a.context():
            for inbox in inboxes:
                inbox.close()


def _dead_executor(org, session_id: str) -> None:
    """Record on the session the channel of an executor that went away (nothing acks there)."""
    with org.context():
        inbox = ExecutorInbox.open(session_id=session_id)
        channel = inbox.channel
        inbox.close()
        Session.objects.filter(pk=session_id).update(executor_channel=channel)


@pytest.mark.parametrize("command", ["pause", "resume", "message"])
def test_a_failed_forward_is_502_and_the_command_stays_recorded(org_a, bus_backend, settings, command):
    settings.AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS = 0.3
    session = new_session(org_a)
    _dead_executor(org_a, session["id"])
    response = post(org_a.client, f"{BASE}/{session['id']}/{command}", {"message": "enough"})
    assert response.status_code == 502
    body = response.json()
    assert body["code"] == "forward_failed" and body["status"] == 502
    assert body["error"].startswith("control recorded but forward failed: ")
    assert body["command"] == command and body["event"]["seq"] == 1 and body["event"]["payload"] == {"command": command, "message": "enough"}
    assert _controls(org_a, session["id"]) == [{"command": command, "message": "enough"}]


def test_a_stop_to_an_executor_that_went_away_is_200_and_recorded(org_a, bus_backend, settings):
    # Issue 25 item 4: a stop is an intent; the route never answers 502 for it.
    settings.AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS = 0.3
    session = new_session(org_a)
    _dead_executor(org_a, session["id"])
    response = post(org_a.client, f"{BASE}/{session['id']}/stop", {"message": "enough"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["command"] == "stop" and body["event"]["seq"] == 1 and body["event"]["payload"] == {"command": "stop", "message": "enough"}
    # The process's receiver took it (and drops it: no inbox of that session any more).
    assert body["forwarded"] is True
    assert _controls(org_a, session["id"]) == [{"command": "stop", "message": "enough"}]


def test_a_stop_answers_200_without_waiting_for_the_executors_ack(org_a, bus_backend, settings):
    """Issue 25 item 4: a stop reached a busy executor that acked only after the forward timeout,
    and the route answered 502 `forward_failed` although the run stopped. The stop is answered
    200 while the executor's receiver is still busy with it, and the executor gets it."""
    import threading

    settings.AGENTS_CONTROL_FORWARD_TIMEOUT_SECONDS = 0.3
    session = new_session(org_a)
    busy, release = threading.Event(), threading.Event()
    with org_a.context():
        inbox = ExecutorInbox.open(session_id=session["id"])
    inbox.watch(lambda command: (busy.set(), release.wait(10)))  # the receiver stays on the stop: no ack in time
    try:
        response = post(org_a.client, f"{BASE}/{session['id']}/stop", {"message": "enough"})
        answered_before_release = not release.is_set()
        assert busy.wait(5)  # the executor's receiver did get the stop
        release.set()
        assert answered_before_release
        assert response.status_code == 200, response.content
        assert response.json()["forwarded"] is True and response.json()["event"]["seq"] == 1
        assert inbox.wait(5) == {"command": "stop", "message": "enough", "payload": None, "seq": 1}
        assert _controls(org_a, session["id"]) == [{"command": "stop", "message": "enough"}]
    finally:
        release.set()
        with org_a.context():
            inbox.close()


def test_an_executor_in_another_process_over_the_in_memory_layer_reads_the_log(org_a, settings):
    # `make run`: daphne and a django-q2 worker share no channel layer. The worker's inbox is
    # recorded with its process tag; other processes do not try the bus (no 5 s wait, no 502)
    # and the executor drains the command from the durable log.
    settings.AGENTS_CONTROL_POLL_SECONDS = 0.05
    # The in-memory layer even in the PostgreSQL + Redis pass: this is what a process without Redis does.
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}}
    reset_bus()
    from sessions import control

    session = new_session(org_a)
    with org_a.context():
        inbox = ExecutorInbox.open(session_id=session["id"])
    try:
        assert inbox.channel.startswith(control.PROCESS_TAG + "|")
        foreign = "otherhost:1|" + inbox.channel.partition("|")[2]
        with org_a.context():
            Session.objects.filter(pk=session["id"]).update(executor_channel=foreign)
        response = post(org_a.client, f"{BASE}/{session['id']}/pause")
        assert response.status_code == 200 and response.json()["forwarded"] is False
        assert inbox.wait(5) == {"command": "pause", "message": None, "payload": None, "seq": 1}
        stop = post(org_a.client, f"{BASE}/{session['id']}/stop", {"message": "enough"})
        assert stop.status_code == 200 and stop.json()["forwarded"] is False
        assert inbox.wait(5) == {"command": "stop", "message": "enough", "payload": None, "seq": 2}
        assert inbox.wait(0.2) is None  # each command once
    finally:
        with org_a.context():
            Session.objects.filter(pk=session["id"]).update(executor_channel=inbox.channel)
            inbox.close()


def test_an_executor_inbox_needs_an_existing_session_of_the_org(org_a, org_b):
    from sessions.errors import SessionNotFound

    foreign = new_session(org_b)
    with org_a.context(), pytest.raises(SessionNotFound):
        ExecutorInbox.open(session_id=foreign["id"])
    with org_b.context():
        assert Session.objects.get(pk=foreign["id"]).executor_channel == ""


EXECUTOR = textwrap.dedent(
    """
    import json, sys, django
    django.setup()
    from tenancy import stores
    from sessions.control import ExecutorInbox
    slug, session_id = sys.argv[1], sys.argv[2]
    with stores.org_context(slug):
        inbox = ExecutorInbox.open(session_id=session_id)
    print("READY", inbox.channel, flush=True)
    for _ in range(2):
        print(json.dumps(inbox.wait(20)), flush=True)
    with stores.org_context(slug):
        inbox.close()
    print("CLOSED", flush=True)
    """
)


def _executor_process(slug: str, session_id: str, redis_url: str) -> subprocess.Popen:
    env = server_env({"REDIS_URL": redis_url})  # this run's data directory and default database
    proc = subprocess.Popen([sys.executable, "-c", EXECUTOR, slug, session_id], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("READY "), proc.stderr.read() if proc.poll() is not None else line
    return proc


def test_an_executor_in_another_process_takes_commands_over_redis(transactional_db, org_a, redis_layer):
    # transactional_db: the executor process reads this test's rows (on PostgreSQL, the org's placement).
    session = new_session(org_a)
    proc = _executor_process(org_a.slug, session["id"], redis_layer)
    try:
        paused = post(org_a.client, f"{BASE}/{session['id']}/pause")
        assert paused.status_code == 200 and paused.json()["forwarded"] is True
        sent = post(org_a.client, f"{BASE}/{session['id']}/message", {"message": "hi", "payload": {"k": "v"}})
        assert sent.json()["forwarded"] is True
        received = [json.loads(proc.stdout.readline()) for _ in range(2)]
        assert received == [
            {"command": "pause", "message": None, "payload": None, "seq": 1},
            {"command": "message", "message": "hi", "payload": {"k": "v"}, "seq": 2},
        ]
        assert proc.stdout.readline().strip() == "CLOSED"
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    with org_a.context():
        assert Session.objects.get(pk=session["id"]).executor_channel == ""
    assert post(org_a.client, f"{BASE}/{session['id']}/stop").json()["forwarded"] is False


def test_daphne_forwards_a_command_to_an_executor_over_redis(redis_daphnes, make_org):
    org = make_org("fw")
    server = redis_daphnes[0]
    headers = {"Authorization": f"Bearer {org.key}"}
    session = httpx.post(f"{server.url}{BASE}", json={"agent": "coder"}, headers=headers, timeout=30).json()
    with org.context():
        inbox = ExecutorInbox.open(session_id=session["id"])
    try:
        response = httpx.post(f"{server.url}{BASE}/{session['id']}/pause", headers=headers, timeout=10)
        assert response.status_code == 200 and response.json()["forwarded"] is True
        assert inbox.pending() == [{"command": "pause", "message": None, "payload": None, "seq": 1}]
    finally:
        with org.context():
            inbox.close()
    assert _controls(org, session["id"]) == [{"command": "pause"}]
