"""A credential in any message of an OpenAI-compatible call is refused — not only system and
user messages: an assistant turn, a tool result, a tool call's arguments, a message's name."""

import pytest

from runs.models import Run
from billing.services import credit_add
from tests.support.credentials import credential_corpus

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = next(value for rule, _, value in credential_corpus() if rule == "agent-token")


@pytest.mark.parametrize("message", [
    {"role": "assistant", "content": f"earlier I said {TOKEN}"},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": f'{{"key": "{TOKEN}"}}'}}]},
    {"role": "tool", "tool_call_id": "c1", "content": f"the token: {TOKEN}"},
    {"role": "user", "name": TOKEN, "content": "hi"},
], ids=["assistant", "tool-call-arguments", "tool-result", "name"])
def test_a_credential_in_any_message_is_a_422_and_no_run(org_a, upstream, message):
    credit_add(org=org_a.org, cents=1000, actor="test")
    assert org_a.client.post("/v1/agents", {"name": "writer"}, content_type="application/json").status_code == 201
    messages = [message, {"role": "user", "content": "go on"}] if message["role"] != "user" else [message]
    if message["role"] == "tool":
        messages = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}, *messages]

    response = org_a.client.post("/v1/agents/openai/v1/chat/completions", {"model": "writer", "messages": messages}, content_type="application/json")

    assert response.status_code == 422, response.content
    error = response.json()["error"]
    assert error["code"] == "secret_in_transcript" and TOKEN not in response.content.decode()
    with org_a.context():
        assert not Run.objects.exists()
    assert upstream.chat_requests == []
