"""Routed coding runs: offered to a machine with the routed-run fields and no credential; the
machine's report settles the run (issue 14 item 5, server side)."""

from __future__ import annotations

import json

import pytest

from runs.models import Run
from tests.coding.conftest import start
from tests.targets.conftest import add_member, machine, post  # noqa: F401 - fixtures
from tests.webhooks.conftest import create_endpoint, inline_delivery, receiver, verified_types  # noqa: F401 - fixtures

pytestmark = pytest.mark.usefixtures("short_wait")


@pytest.fixture
def short_wait(settings):
    settings.AGENTS_CLAIM_WAIT_SECONDS = 0.2


@pytest.fixture
def live_machine(org_a, machine):
    target_id, key = machine
    assert post(org_a.client, f"/{target_id}/claim", **{"X-Target-Key": key}).status_code == 204
    return target_id, key


def test_routed_coding_run_is_offered_with_its_fields_and_no_credential(shop, live_machine, remote, settings, monkeypatch):
    monkeypatch.setenv("SHOP_TOKEN", "ghp_" + "a" * 36)
    settings.AGENTS_REPO_CREDENTIALS = json.dumps({"bot": {"ref": "env:SHOP_TOKEN", "grantedTo": [shop.slug]}})
    assert shop.client.patch("/v1/agents/repos/acme/shop", {"credential": "bot"}, content_type="application/json").status_code == 200
    target_id, key = live_machine
    response = start(shop, targetId=target_id, project="shop", timeoutSeconds=300)
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["routed"] is True and body["targetId"] == target_id

    claimed = post(shop.client, f"/{target_id}/claim", **{"X-Target-Key": key})
    assert claimed.status_code == 200
    offer = claimed.json()
    assert offer["sessionId"] == body["sessionId"] and offer["runId"] == body["runId"]
    assert {k: offer[k] for k in ("kind", "repo", "project", "base", "branch", "prompt", "cloneUrl", "timeoutSeconds")} == {
        "kind": "coding", "repo": "acme/shop", "project": "shop", "base": "main", "branch": body["branch"],
        "prompt": "add a test", "cloneUrl": f"file://{remote}", "timeoutSeconds": 300,
    }
    assert "ghp_" not in claimed.content.decode() and "credential" not in offer

    reported = post(shop.client, f"/{target_id}/runs/{body['runId']}/report",
                    {"ok": True, "changed": True, "branch": body["branch"], "commitSha": "ab" * 20, "diffstat": " 1 file changed", "output": "done"},
                    **{"X-Target-Key": key})
    assert reported.status_code == 200 and reported.json() == {"delivered": True}
    view = shop.client.get(f"/v1/agents/coding/{body['runId']}").json()
    assert view["status"] == "ok" and view["changed"] is True and view["pushed"] is True and view["commitSha"] == "ab" * 20
    with shop.context():
        assert Run.objects.get(pk=body["runId"]).status == "ok"


def test_routed_coding_run_to_an_unknown_machine_is_404(shop):
    response = start(shop, targetId="tgt_" + "0" * 32)  # well formed, unknown (a malformed id is 400)
    assert response.status_code == 404
    with shop.context():
        assert Run.objects.count() == 0


def test_routed_coding_run_needs_no_sandbox_here(shop, live_machine, settings):
    settings.AGENTS_CODING_SANDBOX = "none"
    assert start(shop, targetId=live_machine[0]).status_code == 202


def test_routed_coding_run_needs_no_inference_here(shop, live_machine, settings):
    settings.INFERENCE_BASE_URL = ""  # the machine calls its model: its request names the target (RunRequest.target_id)
    response = start(shop, targetId=live_machine[0])
    assert response.status_code == 202, response.content
    with shop.context():
        assert Run.objects.get(pk=response.json()["runId"]).status == "running"


@pytest.mark.parametrize("pushed", [True, False])
def test_a_routed_coding_run_that_pushed_emits_coding_pushed_like_a_server_run(shop, live_machine, receiver, inline_delivery, pushed):
    endpoint = create_endpoint(shop, receiver.url, events=["coding.pushed"])
    receiver.secret = endpoint["secret"]
    target_id, key = live_machine
    body = start(shop, targetId=target_id).json()
    assert post(shop.client, f"/{target_id}/claim", **{"X-Target-Key": key}).status_code == 200

    reported = post(shop.client, f"/{target_id}/runs/{body['runId']}/report",
                    {"ok": True, "changed": True, "pushed": pushed, "branch": body["branch"], "commitSha": "cd" * 20,
                     "diffstat": " 1 file changed", "output": "done"}, **{"X-Target-Key": key})

    assert reported.status_code == 200 and reported.json() == {"delivered": True}
    if not pushed:
        assert receiver.received == []  # changed but not pushed: nothing to announce
        return
    assert verified_types(receiver) == ["coding.pushed"]
    data = receiver.received[0].verified["data"]
    assert (data["id"], data["kind"], data["status"]) == (body["runId"], "coding", "ok")
    assert (data["branch"], data["commitSha"], data["repo"]) == (body["branch"], "cd" * 20, "acme/shop")


def test_a_routed_coding_runs_summary_is_posted_into_its_reply_conversation(shop, live_machine):
    from chat.models import Message
    from chat.services import conversation_create

    with shop.context():
        conversation = conversation_create(title="planning", turns=[{"role": "user", "content": "fix it"}], actor="user:t").id
    target_id, key = live_machine
    body = start(shop, targetId=target_id, replyConversationId=conversation, project="shop-site").json()
    assert post(shop.client, f"/{target_id}/claim", **{"X-Target-Key": key}).status_code == 200
    reported = post(shop.client, f"/{target_id}/runs/{body['runId']}/report",
                    {"status": "ok", "output": "Fixed it\n\nbranch: x", "summary": "Fixed it", "changed": True, "pushed": True,
                     "branch": body["branch"], "commitSha": "ef" * 20, "diffstat": " 1 file changed, 1 insertion(+)"},
                    **{"X-Target-Key": key})
    assert reported.status_code == 200 and reported.json() == {"delivered": True}
    with shop.context():
        [reply] = Message.objects.filter(conversation_id=conversation, role="assistant")
    assert reply.run_id == body["runId"] and reply.content.startswith("Coding run ok on acme/shop: Fixed it")
    assert f"head: {'ef' * 20}" in reply.content and f"build: /builds/{shop.slug}/shop-site/{body['sessionId']}/" in reply.content
