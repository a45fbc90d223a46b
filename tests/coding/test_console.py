"""Console pages of the coding engine: coding runs with their diff per commit, and machines."""

from __future__ import annotations

import pytest

from coding.sandbox import get_sandbox
from tests.coding.conftest import execute, start
from tests.console.conftest import signed_in
from tests.support.upstream import Reply


@pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed")
def test_a_coding_run_page_shows_each_commit_with_its_diff(shop, upstream, org_b):
    upstream.script(
        Reply(content="Add hello", tool_calls=[("write_file", {"path": "hello.txt", "content": "hello world\n"})]),
        Reply(tool_calls=[("finish", {"summary": "hello"})]),
    )
    body = start(shop).json()
    assert execute(shop, body["runId"]) == "ok"
    client = signed_in(shop)
    listing = client.get("/console/coding/")
    assert listing.status_code == 200 and body["branch"] in listing.content.decode()
    page = client.get(f"/console/coding/{body['runId']}/")
    text = page.content.decode()
    assert page.status_code == 200
    assert "Add hello" in text and "+hello world" in text and "hello.txt" in text
    assert signed_in(org_b).get(f"/console/coding/{body['runId']}/").status_code == 404


def test_machines_page_lists_machines_with_liveness(org_a):
    r = org_a.client.post("/v1/agents/targets", {"label": "build box", "host": "box.local", "spec": {"cpus": 4, "sandbox": "bubblewrap"},
                                                 "metrics": {"load1": 0.5}}, content_type="application/json")
    assert r.status_code == 201, r.content
    page = signed_in(org_a).get("/console/machines/")
    text = page.content.decode()
    assert page.status_code == 200 and "build box" in text and "bubblewrap" in text and "online" in text and "0.50" in text
