"""schemathesis hooks of the identity contract test (loaded through `SCHEMATHESIS_HOOKS`).

Generated *valid* requests get values that hold against rules no JSON Schema keyword states:
a `custom_id` must be new and not reserved, a webhook or health-check URL must name an address
the deployment admits (the live server allows 127.0.0.1), keys must be real X25519 / Ed25519
public keys, a webhook secret a Standard Webhooks secret, an anomaly's `detail` at most 2 KiB of
JSON, a `cursor` a signed `next_cursor` the list handed out (left out). Invalid (negative) requests are never touched: the server must refuse them as they come.
"""

from __future__ import annotations

import base64
import secrets
import uuid

import schemathesis
from schemathesis.generation import GenerationMode

HOOK_URL = "https://127.0.0.1/hook"


def _positive(case) -> bool:
    meta = getattr(case, "meta", None)
    return meta is not None and meta.generation.mode == GenerationMode.POSITIVE


def _raw_public(private_key) -> str:
    from cryptography.hazmat.primitives import serialization

    return base64.b64encode(private_key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


def _keys(body: dict) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    body["public_key"] = _raw_public(X25519PrivateKey.generate())
    body["signing_public_key"] = _raw_public(Ed25519PrivateKey.generate())
    if isinstance(body.get("webhook_secret"), str):
        body["webhook_secret"] = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def _agent(body: dict, *, create: bool) -> None:
    if create and isinstance(body.get("custom_id"), str) and body["custom_id"]:
        body["custom_id"] = "c" + uuid.uuid4().hex[:12]
    if not create:
        body.pop("custom_id", None)  # immutable: only the agent's own value is valid
    for field in ("webhook_url", "health_check_url"):
        if isinstance(body.get(field), str) and body[field]:
            body[field] = HOOK_URL
    if body.get("connection_mode") == "webhook":
        body["webhook_url"] = HOOK_URL
    elif create or body.get("connection_mode") is not None:
        body.pop("webhook_url", None)  # only a webhook agent has one (a websocket agent may not)
    if isinstance(body.get("avatar_url"), str) and body["avatar_url"]:
        body["avatar_url"] = "https://example.com/avatar.png"


def _anomaly(body: dict) -> None:
    detail = body.get("detail")
    if isinstance(detail, dict):
        body["detail"] = {str(k)[:40]: str(v)[:200] for k, v in list(detail.items())[:4]}


@schemathesis.hook
def map_case(context, case):
    """Give a generated valid request values that hold against stored data and unstated rules."""
    if not _positive(case):
        return case
    if isinstance(case.query, dict):
        case.query.pop("cursor", None)  # only a next_cursor this list handed out is valid (signed)
    if not isinstance(case.body, dict):
        return case
    path, method = case.operation.path, case.method.upper()
    if path == "/v1/identity/agents" and method == "POST":
        _agent(case.body, create=True)
    elif path == "/v1/identity/agents/{ref}" and method == "PATCH":
        _agent(case.body, create=False)
    elif path in ("/v1/identity/users/me/keys", "/v1/identity/agents/{ref}/keys/register"):
        _keys(case.body)
    elif path == "/v1/identity/backup" and method == "PUT":
        case.body["encrypted_backup_blob_v2"] = base64.b64encode(secrets.token_bytes(48)).decode()
    elif path == "/v1/identity/anomalies" and method == "POST":
        _anomaly(case.body)
    return case
