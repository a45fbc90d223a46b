"""POST /v1/agents/coding says what it does (issue 30 item 7): `base` is checked on the remote before
the 202, `replyConversationId` must name a conversation of the org and receives the run's summary,
the public implementation's narration fields are refused, not ignored."""

from __future__ import annotations

import json

import pytest

from runs.models import Run
from chat.models import Conversation, Message
from chat.services import conversation_create
from coding.sandbox import get_sandbox
from sessions.models import Event
from tests.coding.conftest import execute, fund, start
from tests.support.upstream import Reply


def _runs(org) -> list[Run]:
    with org.context():
        return list(Run.objects.all())


def _conversation(org, title: str = "planning") -> str:
    with org.context():
        return conversation_create(title=title, turns=[{"role": "user", "content": "fix the tests please"}], actor="user:t").id


def test_missing_base_is_400_naming_the_branch_and_nothing_starts(shop, upstream):
    response = start(shop, base="nope")
    assert response.status_code == 400, response.content
    assert response.json() == {"status": 400, "code": "base_not_found", "error": "branch 'nope' does not exist in acme/shop", "base": "nope"}
    assert _runs(shop) == []
    assert start(shop, base="main").status_code == 202


def test_a_ref_for_base_is_400_saying_to_write_the_branch_name_even_unasked_or_routed(shop, upstream, remote):
    import shutil

    expected = {"status": 400, "code": "invalid_request", "error": "base is a branch name: write 'main', not the ref 'refs/heads/main'"}
    assert start(shop, base="refs/heads/main").json() == expected
    shutil.rmtree(remote)  # a remote that cannot be asked: the ref is still refused before the 202
    assert start(shop, base="refs/heads/main").json() == expected
    assert start(shop, base="refs/heads/main", targetId="tgt_" + "0" * 32).json() == expected  # before the machine is looked up
    assert start(shop, base="refs/tags/v1").json()["error"] == "base is a branch name, not the ref 'refs/tags/v1'"
    assert _runs(shop) == []


def test_an_unreachable_remote_is_left_for_the_run_to_find(shop, upstream, remote):
    import shutil

    shutil.rmtree(remote)
    response = start(shop, base="main")
    assert response.status_code == 202  # the remote did not answer: not told "missing"


@pytest.mark.parametrize("field", ["desktop", "replyChannel", "replyThread"])
def test_narration_fields_are_refused_as_not_supported_here(shop, upstream, field):
    response = start(shop, **{field: "C123"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_request" and body["error"].startswith(f"{field} is not supported here")
    assert _runs(shop) == []
    assert start(shop, **{field: None}).status_code == 400  # present at all is refused


def test_reply_conversation_of_another_org_or_unknown_is_404(shop, org_b, upstream):
    foreign = _conversation(org_b)
    for value in (foreign, "conv_" + "0" * 32):  # well formed, unknown (a malformed id is 400: tests/agents_site/test_id_fields.py)
        response = start(shop, replyConversationId=value)
        assert response.status_code == 404 and response.json() == {
            "status": 404, "code": "not_found", "error": "replyConversationId: no conversation with that id"}
    assert _runs(shop) == []


@pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed")
def test_run_summary_is_appended_to_the_reply_conversation(shop, upstream):
    conversation = _conversation(shop)
    upstream.script(
        Reply(content="Add notes", tool_calls=[("write_file", {"path": "NOTES.md", "content": "n\n"})]),
        Reply(tool_calls=[("finish", {"summary": "Notes added"})]),
    )
    response = start(shop, replyConversationId=conversation, project="shop-site")
    assert response.status_code == 202, response.content
    started = response.json()
    assert execute(shop, started["runId"]) == "ok"
    body = shop.client.get(f"/v1/agents/coding/{started['runId']}").json()
    assert body["replyConversationId"] == conversation
    with shop.context():
        messages = list(Message.objects.filter(conversation_id=conversation).order_by("position"))
        assert Conversation.objects.get(pk=conversation).turns == 2
    assert [m.role for m in messages] == ["user", "assistant"]
    text = messages[1].content
    assert text.startswith("Coding run ok on acme/shop: Notes added")
    assert f"branch: {started['branch']}" in text and f"head: {body['commitSha']}" in text
    assert "1 file changed" in text
    assert f"build: /builds/{shop.slug}/shop-site/{started['sessionId']}/" in text
    assert messages[1].run_id == started["runId"]


@pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed")
def test_a_run_that_changes_nothing_is_ok_unchanged_and_billed(shop, upstream):
    from billing.models import LedgerEntry

    upstream.script(Reply(tool_calls=[("read_file", {"path": "README.md"})]), Reply(tool_calls=[("finish", {"summary": "Already fine"})]))
    started = start(shop).json()
    assert execute(shop, started["runId"]) == "ok"
    body = shop.client.get(f"/v1/agents/coding/{started['runId']}").json()
    assert body["status"] == "ok" and body["changed"] is False and body["pushed"] is False and body["commits"] == []
    with shop.context():
        final = json.loads(Event.objects.filter(session_id=started["sessionId"]).order_by("-seq").first().payload)
        run = Run.objects.get(pk=started["runId"])
    assert final["changed"] is False and run.output.startswith("Already fine")
    debits = list(LedgerEntry.objects.filter(run_id=started["runId"], kind="agent").values_list("amount_cents", flat=True))
    assert debits == [-100] and run.fee_cents == 100  # billed once, like every ok run


def test_an_agent_with_approval_rules_is_refused_as_not_supported_for_coding(shop, upstream):
    created = shop.client.post("/v1/agents", {"name": "careful", "tools": ["calculator"], "approval": {"tools": ["calculator"]}},
                               content_type="application/json")
    assert created.status_code == 201, created.content
    response = start(shop, agentRef="careful")
    assert response.status_code == 400
    assert response.json()["error"].startswith("agentRef: agent 'careful' has approval rules")
    assert _runs(shop) == []
