"""Bad input on the A2A face: malformed JSON-RPC answers A2A's JSON-RPC error codes and starts
nothing; an unknown or another org's agent is 404 and another org's task is "task not found";
what is refused stores and bills nothing."""

from __future__ import annotations

import httpx
import pytest

from tests.a2a_server.conftest import debits, endpoint, make_agent, stored_runs
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]

V1 = {"A2A-Version": "1.0"}
GITHUB = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"  # a GitHub token shape the scanner knows


def call(live, key: str | None, body, *, name: str = "writer", headers: dict | None = None) -> httpx.Response:
    """POST one JSON-RPC body (a dict, or raw bytes) to agent `name`'s endpoint."""
    sent = {**V1, **(headers or {})}
    if key:
        sent["Authorization"] = f"Bearer {key}"
    if isinstance(body, (bytes, str)):
        return httpx.post(endpoint(live, name), content=body, headers={**sent, "Content-Type": "application/json"}, timeout=60)
    return httpx.post(endpoint(live, name), json=body, headers=sent, timeout=60)


def send(text: str = "hi", **message) -> dict:
    return {"jsonrpc": "2.0", "id": 7, "method": "SendMessage",
            "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}], **message}}}


def error_of(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    body = response.json()
    assert "result" not in body, body
    return body["error"]


def test_malformed_json_rpc_answers_the_protocols_codes_and_starts_nothing(live, org):
    assert error_of(call(live, org.key, b"{not json"))["code"] == -32700
    assert error_of(call(live, org.key, {"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}))["code"] == -32600
    assert error_of(call(live, org.key, [send()]))["code"] == -32600  # batches are not served
    assert error_of(call(live, org.key, {"jsonrpc": "2.0", "id": 1, "method": "tasks/explode"}))["code"] == -32601
    assert error_of(call(live, org.key, {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": "hi"}}))["code"] == -32602
    assert error_of(call(live, org.key, send(role="ROLE_AGENT")))["code"] == -32602
    assert error_of(call(live, org.key, send("   ")))["code"] == -32602
    unversioned = call(live, org.key, send(), headers={"A2A-Version": ""})
    assert error_of(unversioned)["code"] == -32009  # no A2A-Version header means 0.3, whose names differ
    assert stored_runs(org) == [] and debits(org) == []


def test_a_file_part_is_not_a_supported_content_type(live, org):
    body = send()
    body["params"]["message"]["parts"] = [{"url": "https://example.com/a.pdf", "mediaType": "application/pdf"}]

    assert error_of(call(live, org.key, body))["code"] == -32005
    assert stored_runs(org) == []


def test_an_unknown_context_is_refused_naming_the_field(live, org):
    error = error_of(call(live, org.key, send(contextId="conv_nope")))

    assert error["code"] == -32602 and "message.contextId" in error["message"]
    assert stored_runs(org) == []


def test_a_credential_in_the_message_is_refused_and_nothing_is_stored(live, org):
    response = call(live, org.key, send(f"deploy with {GITHUB}"))
    error = error_of(response)

    assert error["code"] == -32602 and GITHUB not in response.text
    assert error["data"][0]["metadata"] == {"status": "422", "code": "secret_in_transcript"}
    assert stored_runs(org) == [] and debits(org) == []


def test_an_unknown_or_another_orgs_agent_is_404_and_no_credential_403(live, org, make_org):
    other = make_org("a2b")
    make_agent(other, "theirs")

    for name in ("ghost", "theirs"):
        missing = call(live, org.key, send(), name=name)
        assert missing.status_code == 404 and missing.json()["code"] == "not_found"
        card = httpx.get(endpoint(live, name) + "/.well-known/agent-card.json", headers={"Authorization": f"Bearer {org.key}"})
        assert card.status_code == 404 and card.json()["code"] == "not_found"
    anonymous = call(live, None, send())
    assert anonymous.status_code == 403 and anonymous.json()["code"] == "forbidden"
    assert httpx.get(endpoint(live, "writer") + "/.well-known/agent-card.json").status_code == 403
    wrong_method = httpx.get(endpoint(live), headers={"Authorization": f"Bearer {org.key}"})
    assert wrong_method.status_code == 405 and wrong_method.headers["Allow"] == "POST"
    assert stored_runs(org) == []


def test_another_orgs_task_id_is_task_not_found(live, org, make_org, upstream):
    upstream.script(Reply(content="theirs"))
    other = make_org("a2c")
    from billing.services import credit_add

    credit_add(org=other.org, cents=1000, actor="test")
    make_agent(other, "writer")
    theirs = call(live, other.key, send()).json()["result"]["task"]["id"]

    for method in ("GetTask", "CancelTask"):
        error = error_of(call(live, org.key, {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"id": theirs}}))
        assert error["code"] == -32001, method
    continued = call(live, org.key, send(taskId=theirs))
    assert error_of(continued)["code"] == -32001
    [their_run] = stored_runs(other)
    assert their_run.status == "ok" and stored_runs(org) == []


def test_a_finished_task_takes_no_further_message(live, org, upstream):
    upstream.script(Reply(content="one"))
    task = call(live, org.key, send()).json()["result"]["task"]

    error = error_of(call(live, org.key, send("again", taskId=task["id"])))

    assert error["code"] == -32602 and task["contextId"] in error["message"]
    assert len(stored_runs(org)) == 1


def test_the_v0_3_names_are_served_through_the_sdks_adapter(live, org, upstream):
    upstream.script(Reply(content="old client"))
    body = {"jsonrpc": "2.0", "id": "x", "method": "message/send",
            "params": {"message": {"messageId": "m-1", "role": "user", "kind": "message", "parts": [{"kind": "text", "text": "hi"}]}}}

    result = call(live, org.key, body, headers={"A2A-Version": "0.3"}).json()["result"]

    assert result["kind"] == "task" and result["status"]["state"] == "completed"
    assert result["artifacts"][0]["parts"][0]["text"] == "old client"
    [stored] = stored_runs(org)
    assert (stored.id, stored.kind) == (result["id"], "a2a")


def test_a_key_limited_to_the_openai_endpoint_is_refused(live, org):
    from tenancy.services import api_key_create

    _, limited = api_key_create(org=org.org, user=org.user, scope="openai", allowed_agents=["writer"])

    refused = call(live, limited, send())
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert stored_runs(org) == []
