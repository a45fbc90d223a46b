"""Answers the platform means to give are not errors in its log (issue 51 item 4).

A daphne serves an org while it is being restored (the restore's own fence: the flag file in
SQLite mode, the `running` restore row in PostgreSQL mode), a caller with a refused credential,
and clients that hang up — on a run waiting for its model, on a streamed run, on the session
stream. Its log is then read: each expected answer is one line (a warning at most), and nothing
in it is a traceback or "Internal Server Error". The restore drill with Litestream reads its
daphne's log the same way (tests/tenancy/test_backups.py).
"""

from __future__ import annotations

import threading

import httpx
import pytest

from agents_site.vocabulary import RestoreStatus
from runs.models import Run
from tenancy.backups import fence
from tenancy.models import OrgRestore
from tests.agents.conftest import fund, make_agent
from tests.support.live import LiveServer
from tests.support.logs import problems
from tests.support.upstream import Reply
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]

SESSIONS = "/v1/agents/sessions"


class _Restoring:
    """Org `slug` under restore as `restore_org` holds it: in SQLite mode the flag up and every
    frame drained; in PostgreSQL mode its `running` restore row."""

    def __init__(self, slug: str, store_kind: str) -> None:
        self.slug, self.store_kind = slug, store_kind

    def __enter__(self):
        if self.store_kind == "sqlite":
            self.fenced = fence.Fenced(self.slug)
            self.fenced.raise_flag()
            self.fenced.drain(30)
        else:
            self.row = OrgRestore.objects.create(slug=self.slug, status=RestoreStatus.RUNNING)
        return self

    def __exit__(self, *exc):
        if self.store_kind == "sqlite":
            self.fenced.lower()
        else:
            OrgRestore.objects.filter(pk=self.row.pk).update(status=RestoreStatus.DONE)


def test_a_restores_503_a_refused_credential_and_clients_that_hang_up_are_one_line_each(org_a, upstream, store_kind, settings):
    fund(org_a)
    make_agent(org_a, "helper")
    server = LiveServer({"INFERENCE_BASE_URL": upstream.base_url, "INFERENCE_API_KEY": "test-key", "AGENTS_DEFAULT_MODEL": "test-model",
                         "AGENTS_SSE_PING_SECONDS": "0.5"}).start()
    headers = {"Authorization": f"Bearer {org_a.key}"}
    try:
        with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
            assert client.get(SESSIONS).status_code == 200
            with _Restoring(org_a.slug, store_kind):
                refused = wait_until(lambda: (r := client.get(SESSIONS)).status_code == 503 and r, timeout=30,
                                     what="the restore's 503")  # PostgreSQL mode reads the flag at most once a second
                created = client.post("/v1/agents", json={"name": "during"})
            assert refused.json()["condition"] == "restoring" and refused.headers["Retry-After"] == "5"
            assert created.status_code == 503
            wait_until(lambda: client.get(SESSIONS).status_code == 200, timeout=30, what="the org served again")
            assert client.get(SESSIONS, headers={"Authorization": "Bearer ak_not-a-key"}).status_code == 403

            # A client that hangs up on a run waiting for its model: the run still ends, unlogged.
            held = threading.Event()
            upstream.script(Reply(hold=held, content="late"))
            with pytest.raises(httpx.TimeoutException):
                client.post("/v1/agents/helper/run", json={"input": "wait"}, timeout=1)
            held.set()
            with org_a.context():
                wait_until(lambda: Run.objects.filter(input="wait", status="ok").exists(), timeout=60, what="the abandoned run to end ok")
            # One that hangs up on a streamed run, and one on the session stream.
            upstream.script(Reply(content="x" * 40, chunk_size=1, chunk_delay=0.05))
            with client.stream("POST", "/v1/agents/helper/run", json={"input": "stream", "stream": True}) as stream:
                next(stream.iter_lines())
            with client.stream("GET", f"{SESSIONS}/stream") as stream:
                next(stream.iter_lines())
            with org_a.context():
                wait_until(lambda: Run.objects.filter(input="stream").exclude(status="running").exists(), timeout=60,
                           what="the streamed run to end")
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert problems(log) == []
    assert log.count("answered 503 store_unavailable") >= 2  # the GET and the POST (PostgreSQL mode may serve its 1 s cached flag once more)
    assert "Forbidden: /v1/agents/sessions" in log  # Django's own one-line warning for a 403
