"""Every text a caller writes is scanned (issue 29, item 2), generated from both OpenAPI documents.

For every write operation of `/v1/agents` and `/v1/identity/`, a credential goes into every
string field of its body (nested objects and arrays included), one field per request: the
answer is 422 `secret_in_transcript` naming the field — or 400 where the field's own pattern
or length refuses it first — and afterwards no raw credential is anywhere: not in the org's
store file nor its WAL (nor, in the PostgreSQL pass, the org database's `pg_dump`), not in the
lists read back, not in the public gallery. An operation added later is covered without a new
test; one the test cannot address fails it until `BASE` holds a valid body for it.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess

import pytest
from django.conf import settings

from server.api import api
from tenancy import stores
from tests.identity.conftest import create_agent
from tests.support.credentials import credential_corpus
from tests.support.files import file_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

FORMATS = ("api-key", "openai-project", "anthropic-api", "github-classic-pat", "aws-access-key-id", "stripe-live-secret")
CREDENTIALS = {name: value for name, _text, value in credential_corpus() if name in FORMATS}

#: A valid body per write operation: the credential replaces one string of it at a time.
BASE = {
    ("POST", "/v1/agents/sessions"): {"agent": "a"},
    ("PATCH", "/v1/agents/sessions/{id}"): {},
    ("POST", "/v1/agents/sessions/{id}/events"): {"kind": "message", "payload": {"text": "hi"}},
    ("POST", "/v1/agents/sessions/{id}/pause"): {},
    ("POST", "/v1/agents/sessions/{id}/resume"): {},
    ("POST", "/v1/agents/sessions/{id}/stop"): {},
    ("POST", "/v1/agents/sessions/{id}/approve"): {"toolCallId": "call_1", "arguments": {"expression": "1+1"}},
    ("POST", "/v1/agents/sessions/{id}/deny"): {"toolCallId": "call_1", "message": "no"},
    ("POST", "/v1/agents/sessions/{id}/message"): {"message": "hi"},
    ("POST", "/v1/agents/targets"): {"label": "m"},
    ("PATCH", "/v1/agents/targets/{target_id}"): {},
    ("POST", "/v1/agents/repos"): {"owner": "acme", "name": "shop", "cloneUrl": "https://example.com/a.git"},
    ("PATCH", "/v1/agents/repos/{owner}/{name}"): {},
    ("POST", "/v1/agents/coding"): {"prompt": "do it", "repo": "acme/shop"},
    ("POST", "/v1/agents/chat"): {"messages": [{"role": "user", "content": "hi"}],
                                  "tools": [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]},
    ("POST", "/v1/agents/chat/conversations"): {"messages": [{"role": "user", "content": "hi"}]},
    ("POST", "/v1/agents/{ref}/run"): {"input": "hi"},
    ("POST", "/v1/agents"): {"name": "cred"},
    ("PATCH", "/v1/agents/{ref}"): {},
    ("POST", "/v1/identity/agents"): {"display_name": "Cred", "connection_mode": "websocket"},
    ("PATCH", "/v1/identity/agents/{ref}"): {},
    ("POST", "/v1/identity/agents/{ref}/token/regenerate"): {},
    ("POST", "/v1/identity/anomalies"): {"kind": "endpoint_not_allowed", "detail": {"field": "x"}},
    ("POST", "/v1/agents/webhooks"): {"url": "https://hooks.example.com/in", "events": ["run.finished"]},
    ("PATCH", "/v1/agents/webhooks/{webhook_id}"): {},
}
#: Write operations whose body holds no words of the caller (validated by shape instead), with why.
UNSCANNED = {
    ("POST", "/v1/agents/targets/{target_id}/runs/{run_id}/report"): "a machine's report of model output: masked where stored",
    ("POST", "/v1/identity/agents/{ref}/keys/register"): "public keys and the webhook secret the agent registers on purpose",
    ("POST", "/v1/identity/agents/{ref}/manifest"): "a signed A2A card: its signature is checked first, then its text (not the JWS parts) is scanned "
        "by identity.services.manifest_register (tests/identity/test_manifests.py)",
    ("PUT", "/v1/identity/users/me/keys"): "public keys",
    ("POST", "/v1/identity/agents/{ref}/messages"): "a sealed envelope the platform cannot read",
    ("POST", "/v1/identity/users/{user_id}/messages"): "a sealed envelope the platform cannot read",
    ("PUT", "/v1/identity/backup"): "the browser-encrypted key backup",
    ("POST", "/v1/agents/sessions/{id}/shares"): "a number of days: no text of the caller",
    ("POST", "/v1/agents/chat/conversations/{conversation_id}/shares"): "a number of days: no text of the caller",
}


def _resolve(document: dict, schema: dict) -> dict:
    while "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def _string_paths(document: dict, schema: dict, path: tuple = ()) -> list[tuple[tuple, dict]]:
    """Every place a string can go in a body of `schema`: `(path, the string's schema)`."""
    schema = _resolve(document, schema)
    out: list[tuple[tuple, dict]] = []
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            branches = schema[key][:1] if key == "oneOf" else schema[key]
            for branch in branches:
                out.extend(_string_paths(document, branch, path))
    kind = schema.get("type")
    if kind == "string" and "enum" not in schema and "const" not in schema:
        out.append((path, schema))
    if kind == "object" or "properties" in schema:
        for name, sub in schema.get("properties", {}).items():
            out.extend(_string_paths(document, sub, path + (name,)))
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            out.extend(_string_paths(document, extra, path + ("key",)))
    if kind == "array" and isinstance(schema.get("items"), dict):
        out.extend(_string_paths(document, schema["items"], path + (0,)))
    return out


def _put(body: dict, path: tuple, value: str) -> dict:
    body = copy.deepcopy(body)
    node = body
    for step, following in zip(path, path[1:] + (None,)):
        fresh = [] if isinstance(following, int) else {}
        if isinstance(step, int):
            if not node:
                node.append(fresh if following is not None else value)
            if following is None:
                node[0] = value
            elif not isinstance(node[0], (dict, list)):
                node[0] = fresh
            node = node[0]
        else:
            if following is None:
                node[step] = value
            else:
                if not isinstance(node.get(step), (dict, list)):
                    node[step] = fresh
                node = node[step]
    return body


def _writes(document: dict) -> list[tuple[str, str, dict]]:
    out = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            body = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                out.append((method.upper(), path, body["schema"]))
    return out


def _refusable_by_shape(schema: dict, value: str) -> bool:
    """Whether the field's own rule (pattern, length, format) may refuse `value` before the scan."""
    return any(k in schema for k in ("pattern", "format")) or schema.get("maxLength", 10**9) < len(value)


def _store_bytes(slug: str) -> bytes:
    if settings.AGENTS_ORG_DATABASE == "postgres":
        url = settings.DATABASES["default"]
        env = {**os.environ, "PGPASSWORD": url.get("PASSWORD") or ""}
        dump = subprocess.run(["pg_dump", "-h", url.get("HOST") or "127.0.0.1", "-p", str(url.get("PORT") or 5432), "-U", url["USER"],
                               "-a", stores.postgres_database_name(slug)], capture_output=True, env=env, timeout=120, check=True)
        return dump.stdout
    folder = stores.store_path(slug).parent
    return b"".join(file_bytes(p) for p in sorted(folder.iterdir()) if p.is_file())


def test_a_credential_in_any_string_field_of_any_write_is_refused_and_never_stored(org_a):
    agents_doc = api.get_openapi_schema()
    identity_doc = org_a.client.get("/v1/identity/openapi.json").json()
    created = create_agent(org_a.client).json()
    session = org_a.client.post("/v1/agents/sessions", {"agent": "a"}, content_type="application/json").json()["id"]
    values = {"ref": created["agent_id"], "id": session, "target_id": "tgt_" + "0" * 32, "run_id": "run_" + "0" * 32,
              "owner": "acme", "name": "shop", "user_id": org_a.user.get_username(), "webhook_id": "whe_" + "0" * 32}
    tried = scanned = 0
    names = iter(sorted(CREDENTIALS.items()) * 200)
    for document in (agents_doc, identity_doc):
        for method, path, schema in _writes(document):
            if (method, path) in UNSCANNED:
                continue
            assert (method, path) in BASE, f"give {method} {path} a valid body in BASE (or a reason in UNSCANNED)"
            url = path
            for key, value in values.items():
                url = url.replace("{" + key + "}", value)
            if path.startswith("/v1/agents/{ref}"):
                url = url.replace(created["agent_id"], "cred")
            for field_path, field_schema in _string_paths(document, schema):
                fmt, credential = next(names)
                body = _put(BASE[(method, path)], field_path, credential)
                response = org_a.client.generic(method, url, json.dumps(body), content_type="application/json")
                tried += 1
                where = (method, path, field_path, fmt, response.status_code, response.content[:300])
                assert response.status_code in (400, 422), where
                if response.status_code == 400:
                    assert _refusable_by_shape(field_schema, credential), where
                    continue
                answer = response.json()
                assert answer["code"] == "secret_in_transcript", where
                assert credential not in response.content.decode(), where
                scanned += 1
    assert tried > 60 and scanned > 50, (tried, scanned)
    stored = _store_bytes(org_a.slug)
    listed = "".join(org_a.client.get(u).content.decode() for u in ("/v1/agents", "/v1/agents/sessions", "/v1/agents/targets",
                                                                   "/v1/agents/chat/conversations", "/v1/identity/agents", "/v1/agents/builds"))
    for credential in CREDENTIALS.values():
        assert credential.encode() not in stored
        assert credential not in listed
