"""No credential stored anywhere: refused in what a caller sends, masked in what a model or tool says.

Each test greps the org's database file and its WAL (and the answer) for the raw value.
"""

from __future__ import annotations

import json
import secrets
import string
from pathlib import Path

import pytest

from agents.models import Run
from sessions.models import Event, Session
from tenancy import stores
from tests.agents.conftest import debits, make_agent, run
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db


def _token() -> str:
    return "ghp_" + "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(36))


def _store_bytes(slug: str) -> bytes:
    path = stores.store_path(slug)
    return b"".join(Path(f"{path}{suffix}").read_bytes() for suffix in ("", "-wal") if Path(f"{path}{suffix}").exists())


def test_a_run_input_carrying_a_credential_is_refused_before_anything_is_stored(funded, upstream):
    make_agent(funded, "careful")
    token = _token()
    for body in ({"input": f"deploy with {token}"}, {"input": f"deploy with {token}", "background": True}):
        response = funded.client.post("/v1/agents/careful/run", json.dumps(body), content_type="application/json")
        assert response.status_code == 422, response.content
        answer = response.json()
        assert (answer["code"], [f["rule"] for f in answer["findings"]]) == ("secret_in_transcript", ["github-token"])
        assert "github-token" in answer["error"] and token not in response.content.decode()
    with funded.context():
        assert (Run.objects.count(), Session.objects.count()) == (0, 0)
    assert token.encode() not in _store_bytes(funded.slug)
    assert upstream.chat_requests == [] and debits(funded) == []


def test_a_credential_in_the_models_reply_is_masked_everywhere(funded, upstream):
    make_agent(funded, "leaky")
    token = _token()
    upstream.script(Reply(content=f"your token is {token}"))
    response = run(funded, "leaky", "what is my token?")
    assert response.status_code == 200, response.content
    output = response.json()["output"]
    assert token not in output and output.startswith("your token is [redacted:github-token:")
    with funded.context():
        stored = Run.objects.get()
        texts = [e.payload for e in Event.objects.filter(session_id=stored.session_id)]
    assert token not in stored.output and not any(token in t for t in texts)
    assert any("[redacted:github-token:" in t for t in texts)
    assert token.encode() not in _store_bytes(funded.slug)
    assert len(debits(funded)) == 1  # the run itself went on and was billed


def test_a_credential_in_a_tool_call_and_its_result_is_masked_before_it_goes_back_to_the_model(funded, upstream):
    make_agent(funded, "calc", tools=["calculator"])
    token = _token()
    upstream.script(Reply(tool_calls=[("calculator", {"expression": token})]), Reply(content="done"))
    response = run(funded, "calc", "compute")
    assert response.status_code == 200, response.content
    second = json.dumps(upstream.chat_requests[1]["messages"])
    assert token not in second and "[redacted:github-token:" in second
    with funded.context():
        stored = Run.objects.get()
        tool_turns = [json.loads(e.payload) for e in Event.objects.filter(session_id=stored.session_id, kind="tool-call")]
    assert len(tool_turns) == 1 and token not in json.dumps(tool_turns)
    assert token.encode() not in _store_bytes(funded.slug)


def test_a_steering_message_carrying_a_credential_is_refused(funded, upstream):
    session = funded.client.post("/v1/agents/sessions", {"agent": "x"}, content_type="application/json").json()
    token = _token()
    response = funded.client.post(f"/v1/agents/sessions/{session['id']}/message", {"message": f"use {token}"},
                                  content_type="application/json")
    assert response.status_code == 422 and response.json()["code"] == "secret_in_transcript"
    with funded.context():
        assert Event.objects.filter(session_id=session["id"]).count() == 0
    assert token.encode() not in _store_bytes(funded.slug)
