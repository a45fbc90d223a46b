"""A streamed OpenAI-compatible reply closes when its key is revoked; its run goes on (issue 25 item 3).

The live daphne of this package (in-memory layer: the key is revoked over the console, in that
process). The upstream holds the reply after its first piece, so the revocation lands mid-stream.
"""

from __future__ import annotations

import threading
import time

import httpx
import pytest

from agents_site.vocabulary import RunStatus
from tenancy.models import ApiKey
from tests.openai_api.conftest import BASE_PATH, stored_runs
from tests.support.upstream import Reply
from tests.tenancy.test_revocation_live import _console_login

pytestmark = pytest.mark.django_db(transaction=True)


def test_revoking_the_key_ends_its_streamed_reply_and_the_run_still_finishes(live, org, upstream):
    hold = threading.Event()
    upstream.script(Reply(content="hello world, at length", chunk_size=5, pause_after=2, pause=hold))
    body = {"model": "writer", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    lines: list[str] = []
    with httpx.stream("POST", live.url + BASE_PATH + "/chat/completions", json=body,
                      headers={"Authorization": f"Bearer {org.key}"}, timeout=30) as response:
        assert response.status_code == 200
        stream = response.iter_lines()
        for line in stream:
            lines.append(line)
            if line.startswith("data: ") and '"content":"hello' in line:
                break  # the first piece arrived; the upstream now holds the rest
        console = _console_login(live, org.user)
        console.get("/console/keys/")
        row = ApiKey.objects.get(org=org.org)
        answer = console.post(f"/console/keys/{row.pk}/revoke/", data={"csrfmiddlewaretoken": console.cookies["csrftoken"]},
                              headers={"Referer": live.url + "/console/keys/"})
        assert answer.status_code == 302
        rest = list(stream)  # ends: the server closed the response
    hold.set()
    assert ": credential revoked" in rest and "data: [DONE]" not in rest
    assert not any("world" in line for line in rest)  # nothing after the revocation
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and stored_runs(org)[-1].status not in (RunStatus.OK, RunStatus.ERROR):
        time.sleep(0.1)
    run = stored_runs(org)[-1]
    assert run.status == RunStatus.OK and run.output == "hello world, at length"  # a client cut off never stops its run
