"""`run.finished` reaches a receiver verifying with `standardwebhooks`, for every kind of run
(sync, background, chat, OpenAI-compatible, coding, routed), and a run's own callback (issue 32)."""

from __future__ import annotations

import json

import pytest

from coding.sandbox import get_sandbox
from tests.support.upstream import Reply
from tests.webhooks.conftest import create_endpoint, fund, make_agent, post, verified_types
from webhooks.models import EventDelivery, RunCallback

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_delivery")]


@pytest.fixture
def subscribed(org_a, receiver, upstream):
    """org_a funded, agent `helper`, and an endpoint for run.finished at the receiver (whose secret it verifies with)."""
    fund(org_a)
    make_agent(org_a, "helper")
    endpoint = create_endpoint(org_a, receiver.url, events=["run.finished"])
    receiver.secret = endpoint["secret"]
    return endpoint


def _finished(receiver) -> list[dict]:
    assert verified_types(receiver) == ["run.finished"] * len(receiver.received)
    return [got.verified["data"] for got in receiver.received]


def test_a_sync_run_is_delivered_as_its_run_record(org_a, subscribed, receiver):
    response = post(org_a.client, "/v1/agents/helper/run", {"input": "hi"})
    assert response.status_code == 200
    [data] = _finished(receiver)
    assert data == response.json()  # the same public shape GET /v1/agents/runs/{id} answers
    got = receiver.received[0]
    with org_a.context():
        row = EventDelivery.objects.get()
    assert got.headers["webhook-id"] == row.public_id and row.status == "succeeded" and row.attempts == 1
    assert org_a.key not in got.body.decode()  # never a credential


def test_a_background_run_is_delivered_when_it_finishes(org_a, subscribed, receiver, sync_tasks):
    response = post(org_a.client, "/v1/agents/helper/run", {"input": "hi", "background": True})
    assert response.status_code == 202
    [data] = _finished(receiver)
    assert data["id"] == response.json()["runId"] and data["status"] == "ok"


def test_a_chat_round_is_delivered(org_a, subscribed, receiver):
    response = post(org_a.client, "/v1/agents/chat", {"messages": [{"role": "user", "content": "hi"}]})
    assert response.status_code == 200, response.content
    [data] = _finished(receiver)
    assert data["id"] == response.json()["runId"] and data["kind"] == "chat"


def test_an_openai_compatible_call_is_delivered(org_a, subscribed, receiver):
    response = org_a.client.post("/v1/agents/openai/v1/chat/completions", json.dumps({"model": "helper", "messages": [{"role": "user", "content": "hi"}]}),
                                 content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {org_a.key}")
    assert response.status_code == 200, response.content
    [data] = _finished(receiver)
    assert data["kind"] == "openai" and data["status"] == "ok"


def test_a_routed_run_is_delivered_when_the_machine_reports(org_a, subscribed, receiver, settings):
    settings.AGENTS_CLAIM_WAIT_SECONDS = 0.2
    from tests.targets.conftest import post as target_post

    target_id = target_post(org_a.client, "", {"label": "box", "host": "box.local"}).json()["id"]
    key = target_post(org_a.client, f"/{target_id}/key").json()["claimKey"]
    assert target_post(org_a.client, f"/{target_id}/claim", **{"X-Target-Key": key}).status_code == 204
    started = post(org_a.client, "/v1/agents/helper/run", {"input": "hi", "targetId": target_id})
    assert started.status_code == 202, started.content
    assert receiver.received == []  # not finished yet
    target_post(org_a.client, f"/{target_id}/claim", **{"X-Target-Key": key})
    reported = target_post(org_a.client, f"/{target_id}/runs/{started.json()['id']}/report", {"status": "ok", "output": "done", "model": "m1"},
                           **{"X-Target-Key": key})
    assert reported.json() == {"delivered": True}
    [data] = _finished(receiver)
    assert data["id"] == started.json()["id"] and data["kind"] == "routed" and data["output"] == "done"


@pytest.fixture
def shop_remote(settings, tmp_path):
    """A bare repository with one commit under an allowed file root; coding settings as tests/coding's."""
    from tests.coding.conftest import git

    settings.AGENTS_CODING_FEE_CENTS = -1
    settings.AGENTS_REPO_CREDENTIALS = ""
    (tmp_path / "remotes").mkdir()
    settings.AGENTS_REPO_FILE_ROOTS = [str(tmp_path / "remotes")]
    settings.AGENTS_CODING_WORK_DIR = str(tmp_path / "work")
    bare = tmp_path / "remotes" / "shop.git"
    git("init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git("clone", "-q", str(bare), str(seed))
    (seed / "README.md").write_text("# shop\n")
    git("add", "README.md", cwd=seed)
    git("commit", "-q", "-m", "first", cwd=seed)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=seed)
    return bare


@pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed (scripts/test-prereqs.sh)")
def test_a_coding_run_is_delivered_with_its_push(org_a, receiver, upstream, shop_remote):
    from tests.coding.conftest import execute, register, start

    bare = shop_remote
    fund(org_a, 10_000)
    assert register(org_a, bare).status_code == 201
    endpoint = create_endpoint(org_a, receiver.url, events=["run.finished", "coding.pushed"])
    receiver.secret = endpoint["secret"]
    upstream.script(
        Reply(content="Add notes", tool_calls=[("write_file", {"path": "NOTES.md", "content": "notes\n"})]),
        Reply(tool_calls=[("finish", {"summary": "Added notes"})]),
    )
    started = start(org_a, webhook=receiver.url + "/coding")
    assert started.status_code == 202, started.content
    assert execute(org_a, started.json()["runId"]) == "ok"
    types = verified_types(receiver)
    assert sorted(types) == ["coding.pushed", "run.finished", "run.finished"]  # the endpoint's and the run's own callback
    pushed = next(g.verified["data"] for g in receiver.received if g.verified["type"] == "coding.pushed")
    assert pushed["branch"] == started.json()["branch"] and pushed["repo"] == "acme/shop" and len(pushed["commitSha"]) == 40
    assert {g.headers["webhook-id"] for g in receiver.received}.__len__() == 3


def test_a_runs_own_callback_gets_run_finished_signed_with_its_endpoints_secret(org_a, subscribed, receiver):
    response = post(org_a.client, "/v1/agents/helper/run", {"input": "hi", "webhook": receiver.url + "/run-7?x=1"})
    assert response.status_code == 200, response.content
    assert len(_finished(receiver)) == 2  # the endpoint's subscription and the run's own callback
    paths = sorted(g.path for g in receiver.received)
    assert paths == ["/hook", "/hook/run-7?x=1"]
    with org_a.context():
        assert RunCallback.objects.get().run_id == response.json()["id"]


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:{port}/hook-evil",  # a prefix that is not at a segment boundary
    "http://127.0.0.1:{port}/hook/../admin",
    "http://127.0.0.1:{port}/hook/%2e%2e/admin",
    "http://127.0.0.1:{port}/hook/%2E%2E%2Fadmin",
    "http://127.0.0.1:{port}/hook%2f..%2fadmin",
    "http://127.0.0.1:{port}/hook\\..\\admin",
    "http://127.0.0.1:{port}/hook/..;/..;/admin",  # issue 50: `;` path parameters
    "http://127.0.0.1:{port}/hook/%252e%252e/admin",  # double-encoded
    "http://127.0.0.1:{port}/hook/%C0%AE%C0%AE/admin",  # overlong UTF-8
    "http://127.0.0.1:{port}/hook/\uff0e\uff0e/admin",  # full-width dots
    "http://127.0.0.1:{port}/hook//evil.com",  # an empty segment, `//host`
    "https://127.0.0.1:{port}/hook",  # another scheme
    "http://127.0.0.1:1/hook",  # another port
    "http://localhost:{port}/hook",  # another host
    "http://user@127.0.0.1:{port}/hook",
    "not a url",
    "",
])
def test_a_callback_outside_the_orgs_endpoints_is_400_and_nothing_runs(org_a, subscribed, receiver, url):
    url = url.format(port=receiver.server.server_address[1])
    for path, body in [("/v1/agents/helper/run", {"input": "hi"}), ("/v1/agents/chat", {"messages": [{"role": "user", "content": "hi"}]}),
                       ("/v1/agents/coding", {"repo": "acme/shop", "prompt": "x"})]:
        response = post(org_a.client, path, {**body, "webhook": url})
        assert response.status_code == 400, (path, response.content)
        assert response.json()["code"] == "invalid_request" and "webhook" in response.json()["error"]
    with org_a.context():
        from runs.models import Run

        assert Run.objects.count() == 0 and RunCallback.objects.count() == 0
    assert receiver.received == []


def test_another_orgs_endpoint_admits_no_callback(org_a, org_b, subscribed, receiver, upstream):
    fund(org_b)
    make_agent(org_b, "helper")
    response = post(org_b.client, "/v1/agents/helper/run", {"input": "hi", "webhook": receiver.url})
    assert response.status_code == 400


def test_a_runs_finish_reads_where_it_goes_in_one_query(org_a, subscribed, receiver):
    """The subscribed endpoints and the run's own callback come from one statement (issue 32: the
    finish's fixed cost); a callback whose endpoint was disabled since gets nothing."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from runs.models import Run
    from tenancy import stores
    from webhooks import selectors
    from webhooks.models import Endpoint

    response = post(org_a.client, "/v1/agents/helper/run", {"input": "hi", "webhook": receiver.url + "/own"})
    assert response.status_code == 200, response.content
    run_id = response.json()["id"]
    with org_a.context():
        with CaptureQueriesContext(connections[stores.current_alias()]) as captured:
            targets = selectors.run_finished_reach(run_id=run_id)[0]
        assert len(captured.captured_queries) == 1
        assert [url for _, url in targets] == [receiver.url, receiver.url + "/own"]
        assert selectors.run_finished_reach(run_id="run_other")[0] == [(targets[0][0], receiver.url)]
        Endpoint.objects.update(enabled=False)
        assert selectors.run_finished_reach(run_id=run_id)[0] == []
        assert Run.objects.filter(pk=run_id).exists()
