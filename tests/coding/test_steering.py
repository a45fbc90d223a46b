"""A coding run honours message and stop between turns, like every run (issue 14 item 2)."""

from __future__ import annotations

import json
import threading

import pytest

from coding.sandbox import get_sandbox
from sessions.models import Event
from tests.runs.test_run_session import Steer, session_status
from tests.coding.conftest import execute, git, start
from tests.support.upstream import Reply
from tests.support.waiting import wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed"),
]


def test_a_message_reaches_the_next_turn(shop, upstream):
    slow = threading.Event()
    upstream.script(
        Reply(hold=slow, content="Add a", tool_calls=[("write_file", {"path": "a.txt", "content": "a\n"})]),
        Reply(tool_calls=[("finish", {"summary": "done"})]),
    )
    body = start(shop).json()

    def script(sid, steer):
        steer.post(sid, "message", message="also keep it short")
        slow.set()

    steer = Steer(shop, script)
    steer.start()
    assert execute(shop, body["runId"]) == "ok"
    steer.finish()
    assert steer.answers[0][2]["forwarded"] is True
    assert {"role": "user", "content": "also keep it short"} in upstream.chat_requests[1]["messages"]


def test_stop_ends_the_run_without_a_push_and_reports_local_commits(shop, remote, upstream):
    slow = threading.Event()
    upstream.script(
        Reply(content="Add a", tool_calls=[("write_file", {"path": "a.txt", "content": "a\n"})]),
        Reply(hold=slow, content="never", tool_calls=[("finish", {"summary": "never"})]),
    )
    body = start(shop).json()

    def script(sid, steer):
        wait_until(lambda: len(upstream.chat_requests) >= 2, timeout=60, what="the second turn to be in flight")
        # The stop cancels that turn's completion (issue 25): the held reply is never released
        # here (a run that only looked between turns would wait out the hold and finish `ok`).
        steer.post(sid, "stop")

    steer = Steer(shop, script)
    steer.start()
    try:
        assert execute(shop, body["runId"]) == "error"
    finally:
        slow.set()
    steer.finish()
    assert len(upstream.chat_requests) == 2
    assert session_status(shop, body["sessionId"]) == "error"
    with shop.context():
        final = json.loads(Event.objects.filter(session_id=body["sessionId"]).order_by("-seq").first().payload)
    assert final["error"].startswith("stopped by ") and final["pushed"] is False
    assert [c["subject"] for c in final["commits"]] == ["Add a"]
    assert body["branch"] not in git("--git-dir", str(remote), "branch", "--list")
