"""Every id-like field of a `/v1/agents` request body has a pattern, declared and enforced (issue 29 item 3).

Read from the OpenAPI document, so a field added later is covered: a body property whose name
says it refers to something by id (`…Id`, `…Ref`, `target`) declares a `pattern`, and a value
outside it (a slash, markup, an RTL mark, a path) is 400 `invalid_request` naming the field
before the route runs, with nothing stored.
"""

from __future__ import annotations

import json
import re

import pytest

from server.api import api

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

#: Opaque references to things outside the platform, not ids it resolves: spec 003 lets the
#: caller put any text up to 256 characters there (length-checked and scanned, never a path).
OPAQUE = {"taskWorkflowId", "taskRunId", "computeRef", "serviceAccountId"}

_ID_LIKE = re.compile(r"(Id|Ref)$|^target$")

BAD = ["../etc/passwd", "<script>alert(1)</script>", "sess_\u202e" + "0" * 31, "a b", "x" * 129, "tgt_" + "0" * 32 + "/x"]

#: (method, path, field, the other fields the body needs) for each id-like field of a write.
WRITES = [
    ("POST", "/v1/agents/sessions", "parentSessionId", {"agent": "a"}),
    ("POST", "/v1/agents/sessions", "target", {"agent": "a"}),
    ("POST", "/v1/agents/chat", "conversationId", {"messages": [{"role": "user", "content": "hi"}]}),
    ("POST", "/v1/agents/chat", "agent", {"messages": [{"role": "user", "content": "hi"}]}),
    ("POST", "/v1/agents/coding", "agentRef", {"repo": "acme/shop", "prompt": "x"}),
    ("POST", "/v1/agents/coding", "targetId", {"repo": "acme/shop", "prompt": "x"}),
    ("POST", "/v1/agents/coding", "replyConversationId", {"repo": "acme/shop", "prompt": "x"}),
    ("POST", "/v1/agents/someagent/run", "targetId", {"input": "x"}),
    ("PATCH", "/v1/agents/sessions/sess_" + "0" * 32, "target", {}),
    ("POST", "/v1/agents/sessions/sess_" + "0" * 32 + "/approve", "toolCallId", {}),
    ("POST", "/v1/agents/sessions/sess_" + "0" * 32 + "/deny", "toolCallId", {}),
]
#: The concrete paths above as the document spells them.
_DOC_PATHS = {"/v1/agents/someagent/run": "/v1/agents/{ref}/run", "/v1/agents/sessions/sess_" + "0" * 32: "/v1/agents/sessions/{id}",
              "/v1/agents/sessions/sess_" + "0" * 32 + "/approve": "/v1/agents/sessions/{id}/approve",
              "/v1/agents/sessions/sess_" + "0" * 32 + "/deny": "/v1/agents/sessions/{id}/deny"}


def _id_fields() -> list[tuple[str, str, str, dict]]:
    document = api.get_openapi_schema()
    schemas = document["components"]["schemas"]
    found = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is None:
                continue
            for branch in body["schema"].get("oneOf", [body["schema"]]):
                schema = schemas[branch["$ref"].rsplit("/", 1)[1]] if "$ref" in branch else branch
                for name, prop in schema.get("properties", {}).items():
                    if _ID_LIKE.search(name) and name not in OPAQUE:
                        found.append((method.upper(), path, name, prop))
    return found


def test_every_id_like_body_field_declares_a_pattern():
    fields = _id_fields()
    assert {name for *_, name, _ in fields} >= {"parentSessionId", "target", "conversationId", "agentRef", "targetId", "replyConversationId"}
    missing = [(m, p, n) for m, p, n, prop in fields
               if not any("pattern" in branch for branch in prop.get("anyOf", [prop]) if branch.get("type") == "string")]
    assert missing == []


def test_every_id_like_body_field_is_exercised_below():
    exercised = {(m, _DOC_PATHS.get(p, p), f) for m, p, f, _ in WRITES}
    assert {(m, p, n) for m, p, n, _ in _id_fields()} <= exercised


def _stored(org) -> dict:
    with org.context():
        from runs.models import Run
        from chat.models import Conversation
        from sessions.models import Session

        return {"sessions": Session.objects.count(), "runs": Run.objects.count(), "conversations": Conversation.objects.count()}


@pytest.mark.parametrize(("method", "path", "field", "rest"), WRITES, ids=[f"{p}:{f}" for _, p, f, _ in WRITES])
def test_a_bad_id_is_refused_400_naming_the_field_and_nothing_is_stored(org_a, method, path, field, rest):
    before = _stored(org_a)
    for value in BAD:
        response = org_a.client.generic(method, path, json.dumps({**rest, field: value}), content_type="application/json")
        assert response.status_code == 400, (value, response.content)
        body = response.json()
        assert body["code"] == "invalid_request" and body["status"] == 400
        assert [f["field"] for f in body["fields"]] == [f"body.payload.{field}"] or field in body["error"], body
    assert _stored(org_a) == before
