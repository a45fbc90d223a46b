"""A chat round whose agent asks to approve a tool call (issue 28): 202 with the pending request,
the reply lands in the conversation once the approved run resumes."""

from __future__ import annotations

from agents_site.vocabulary import RunStatus
from tests.runs.test_approvals import _resume
from tests.chat.conftest import chat, charged, make_agent, stored, user
from tests.support.task_queue import task_queue  # noqa: F401
from tests.support.upstream import Reply


def test_a_round_waiting_for_approval_answers_202_and_the_reply_lands_after_approval(funded, upstream, task_queue):
    make_agent(funded, "careful", instructions="Be careful.", tools=["calculator"], approval={"tools": ["calculator"]})
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "9-2"})]))
    response = chat(funded, {"agent": "careful", "messages": user("what is 9-2?")})
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == RunStatus.WAITING and body["reply"] == "" and body["run"]["status"] == RunStatus.WAITING
    [request] = body["approvals"]
    assert request["tool"] == "calculator" and request["arguments"] == {"expression": "9-2"}
    assert [m.role for m in stored(funded)["messages"]] == ["user"]  # no reply yet; the conversation is free

    upstream.script(Reply(content="seven"))
    answer = funded.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": request["toolCallId"]},
                                content_type="application/json")
    assert answer.status_code == 200
    assert _resume(task_queue) == 1
    resumed = upstream.requests[-1]["messages"]
    assert resumed[0]["content"] == "Be careful." and resumed[1] == {"role": "user", "content": "what is 9-2?"}
    assert resumed[-1]["role"] == "tool" and resumed[-1]["content"] == "7"
    messages = stored(funded)["messages"]
    assert [(m.role, m.content) for m in messages] == [("user", "what is 9-2?"), ("assistant", "seven")]
    assert len(charged(funded)) == 1


def test_a_resumed_round_starts_from_the_prompt_it_opened_with(funded, upstream, task_queue):
    """The request's `system` text and every message it carried (not only the stored user turn) are
    in the resumed round's prompt: the model resumes with exactly what it asked with."""
    make_agent(funded, "careful", instructions="Be careful.", tools=["calculator"], approval={"tools": ["calculator"]})
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "9-2"})]))
    messages = [{"role": "user", "content": "earlier question"}, {"role": "assistant", "content": "earlier answer"},
                {"role": "user", "content": "what is 9-2?"}]
    response = chat(funded, {"agent": "careful", "system": "Answer in French.", "messages": messages})
    assert response.status_code == 202, response.content
    body = response.json()
    asked_with = upstream.requests[-1]["messages"]
    assert asked_with[0]["content"] == "Be careful.\n\nAnswer in French." and len(asked_with) == 4

    upstream.script(Reply(content="sept"))
    answer = funded.client.post(f"/v1/agents/sessions/{body['sessionId']}/approve", {"toolCallId": body["approvals"][0]["toolCallId"]},
                                content_type="application/json")
    assert answer.status_code == 200
    assert _resume(task_queue) == 1
    resumed = upstream.requests[-1]["messages"]
    assert resumed[:4] == asked_with
    assert [m["role"] for m in resumed[4:]] == ["assistant", "tool"] and resumed[-1]["content"] == "7"
    assert [(m.role, m.content) for m in stored(funded)["messages"]] == [("user", "what is 9-2?"), ("assistant", "sept")]
