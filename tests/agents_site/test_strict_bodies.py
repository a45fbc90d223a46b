"""One rule for every write body of both APIs (issue 29, "the schemas say what is enforced").

Generated from the two OpenAPI documents, so a route added later is covered without a new test:
every operation with a JSON request body declares `additionalProperties: false` on it, refuses
a field it does not declare with 400 naming it, and refuses a body that is not JSON with 415 —
each in the one error shape, with nothing stored.
"""

from __future__ import annotations

import json

import pytest

from server.api import api
from tests.identity.conftest import bearer, create_agent

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

UNKNOWN = "zzUnknownField"


def _identity_document(client) -> dict:
    return client.get("/v1/identity/openapi.json").json()


def _resolve(document: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _writes(document: dict) -> list[tuple[str, str, dict]]:
    out = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                out.append((method.upper(), path, _resolve(document, body["schema"])))
    return out


def _objects(document: dict, schema: dict) -> list[dict]:
    """The object schemas a body may be: the schema itself, or each branch of a oneOf."""
    return [_resolve(document, branch) for branch in schema.get("oneOf", [schema])]


AGENTS_DOC = None


def _agents_document() -> dict:
    global AGENTS_DOC
    if AGENTS_DOC is None:
        AGENTS_DOC = api.get_openapi_schema()
    return AGENTS_DOC


def _agents_writes():
    return [(m, p) for m, p, _ in _writes(_agents_document())]


def _fill(path: str, values: dict) -> str:
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    return path


@pytest.mark.parametrize("method, path", _agents_writes(), ids=lambda v: v)
def test_every_agents_write_body_declares_and_refuses_unknown_fields_and_non_json(org_a, method, path):
    document = _agents_document()
    schema = next(s for m, p, s in _writes(document) if (m, p) == (method, path))
    for branch in _objects(document, schema):
        assert branch.get("additionalProperties") is False, (method, path, branch.get("title"))
    url = _fill(path, {"ref": "nobody", "id": "sess_" + "0" * 32, "target_id": "tgt_" + "0" * 32, "run_id": "run_" + "0" * 32,
                       "owner": "acme", "name": "shop", "conversation_id": "conv_" + "0" * 32})
    response = org_a.client.generic(method, url, json.dumps({UNKNOWN: 1}), content_type="application/json")
    assert response.status_code == 400, (method, path, response.content)
    body = response.json()
    assert body["code"] == "invalid_request" and UNKNOWN in body["error"], body
    assert any(f["field"].endswith(UNKNOWN) and f["message"] == "unknown field" for f in body["fields"]), body
    refused = org_a.client.generic(method, url, "name=x", content_type="text/plain")
    assert refused.status_code == 415, (method, path, refused.content)
    assert refused.json() == {"status": 415, "code": "unsupported_media_type", "error": refused.json()["error"]}
    assert 415 in document["paths"][path][method.lower()]["responses"]


def test_a_batch_of_events_refuses_an_unknown_field_in_a_turn_and_beside_it(org_a):
    session = org_a.client.post("/v1/agents/sessions", {"agent": "a"}, content_type="application/json").json()
    url = f"/v1/agents/sessions/{session['id']}/events"
    turn = {"kind": "message", "payload": {"text": "hi"}}
    inside = org_a.client.post(url, {"events": [turn, {**turn, "paylod": 1}]}, content_type="application/json")
    assert inside.status_code == 400 and "paylod" in inside.json()["error"], inside.content
    beside = org_a.client.post(url, {"events": [turn], "extra": True}, content_type="application/json")
    assert beside.status_code == 400 and "extra" in beside.json()["error"], beside.content
    assert org_a.client.get(f"/v1/agents/sessions/{session['id']}/events").json()["events"] == []


def test_every_identity_write_body_declares_and_refuses_unknown_fields_and_non_json(org_a):
    document = _identity_document(org_a.client)
    created = create_agent(org_a.client).json()
    values = {"ref": created["agent_id"], "user_id": org_a.user.get_username(), "delivery_id": "dlv_" + "0" * 32}
    writes = _writes(document)
    assert len(writes) >= 8
    for method, path, schema in writes:
        assert schema.get("additionalProperties") is False, (method, path)
        operation = document["paths"][path][method.lower()]
        agent_token = any("agentToken" in requirement for requirement in operation.get("security", []))
        headers = bearer(created["agent_token"]) if agent_token else {}
        url = _fill(path, values)
        response = org_a.client.generic(method, url, json.dumps({UNKNOWN: 1}), content_type="application/json", **headers)
        assert response.status_code == 400, (method, path, response.content)
        body = response.json()
        assert body["code"] == "invalid_request" and any(f["field"] == UNKNOWN and f["message"] == "unknown field" for f in body["fields"]), body
        refused = org_a.client.generic(method, url, "<a/>", content_type="application/xml", **headers)
        assert refused.status_code == 415 and refused.json()["code"] == "unsupported_media_type", (method, path, refused.content)
        assert "415" in operation["responses"]
