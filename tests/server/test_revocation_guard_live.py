"""A streamed run and a streamed chat round close when their key is revoked; their runs go on
(issue 25 item 3: "every … streamed run/chat/OpenAI response … authenticated by it is closed").

`server.revocation_guard` on a real daphne (the embedded default: the key is revoked over
the console, in that process). The upstream holds the reply after its first pieces, so the
revocation lands mid-stream; the OpenAI-compatible stream has its own test
(tests/openai_api/test_revocation.py).
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from runs.models import Run
from agents_site.vocabulary import RunStatus
from tenancy.models import ApiKey
from tests.agents.conftest import fund
from tests.support.live import LiveServer
from tests.support.upstream import Reply
from tests.tenancy.test_revocation_live import _console_login

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "hello world, at length"


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, upstream_server):
    """One daphne for the module, its inference the loopback upstream."""
    server = LiveServer({"INFERENCE_BASE_URL": upstream_server.base_url, "INFERENCE_API_KEY": "test-key",
                         "AGENTS_DEFAULT_MODEL": "test-model", "AGENTS_SSE_PING_SECONDS": "5"}).start()
    yield server
    server.stop()


def _revoke_in_the_console(live, org) -> None:
    console = _console_login(live, org.user)
    console.get("/console/keys/")
    row = ApiKey.objects.get(org=org.org, name="")
    answer = console.post(f"/console/keys/{row.pk}/revoke/", data={"csrfmiddlewaretoken": console.cookies["csrftoken"]},
                          headers={"Referer": live.url + "/console/keys/"})
    assert answer.status_code == 302


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/agents/talker/run", {"input": "hi", "stream": True}),
    ("/v1/agents/chat", {"agent": "talker", "messages": [{"role": "user", "content": "hi"}], "stream": True}),
], ids=["run", "chat"])
def test_revoking_the_key_ends_its_streamed_reply_and_the_run_still_finishes(live, make_org, upstream, path, body):
    org = make_org("rv")
    fund(org)
    auth = {"Authorization": f"Bearer {org.key}"}
    assert httpx.post(live.url + "/v1/agents", json={"name": "talker"}, headers=auth, timeout=30).status_code == 201
    hold = threading.Event()
    upstream.script(Reply(content=REPLY, chunk_size=5, pause_after=2, pause=hold))
    lines: list[str] = []
    try:
        with httpx.stream("POST", live.url + path, json=body, headers=auth, timeout=30) as response:
            assert response.status_code == 200, response.read()
            stream = response.iter_lines()
            for line in stream:
                lines.append(line)
                if line.startswith("data: ") and "hello" in line:
                    break  # the first piece arrived; the upstream now holds the rest
            _revoke_in_the_console(live, org)
            rest = list(stream)  # ends: the server closed the response
    finally:
        hold.set()
    assert ": credential revoked" in rest
    assert not any("world" in line for line in rest)  # nothing of the reply after the revocation
    assert not any(line.startswith("event: run") or line.startswith("event: error") for line in rest)  # no final frame
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with org.context():
            run = Run.objects.order_by("-created_at").first()
        if run is not None and run.status in (RunStatus.OK, RunStatus.ERROR):
            break
        time.sleep(0.1)
    assert (run.status, run.output) == (RunStatus.OK, REPLY)  # a client cut off never stops its run
