"""The artifacts the system agent sends (spec 001 "agent_creation_form 完整模板" and its table).

Each builder returns one message `{"msg_subtype": "artifact_form", "artifact": {...}}`; the
system agent hands it to the client as the op `{"name": "artifact", "args": <message>}`.
Endpoints are spelled as this platform serves them (`POST /v1/identity/agents`, …; `:id` is a
path parameter the client fills from `client_action.params` or, after success, from the
previous response through `params_from_response` `{":id": "$.agent_id"}`). The client keeps its
own canonical allow-list (static/console/client_action.js) and never trusts these lists.
"""

from __future__ import annotations

from django.conf import settings

from agents_site.vocabulary import ArtifactSubtype, ClientAuth, ConnectionMode, IdentityCategory, MsgSubtype

ARTIFACT_OP = "artifact"  # the op name of an artifact message handed to the client

CREATE = "POST /v1/identity/agents"
KEYS_REGISTER = "POST /v1/identity/agents/:id/keys/register"
UPDATE = "PATCH /v1/identity/agents/:id"
DELETE = "DELETE /v1/identity/agents/:id"
ROTATE = "POST /v1/identity/agents/:id/token/regenerate"
CANONICAL_ENDPOINTS = (CREATE, KEYS_REGISTER, UPDATE, DELETE, ROTATE)

# What a client's artifact_response may carry back, per response subtype (never a secret).
ALLOWED_FIELDS = {
    ArtifactSubtype.AGENT_CREATED: ("agent_id", "display_name"),
    ArtifactSubtype.AGENT_UPDATED: ("agent_id", "display_name"),
    ArtifactSubtype.AGENT_DELETED: ("agent_id", "display_name"),
    ArtifactSubtype.AGENT_TOKEN_ROTATED: ("agent_id", "display_name", "emergency"),
}
FORBIDDEN_FIELDS = ("agent_token", "private_key", "webhook_secret")  # spec 001's list, as the template spells it
CUSTOM_ID_PATTERN = "^[a-z0-9_]{4,30}$"


def _reserved() -> list[str]:
    return list(settings.AGENTS_IDENTITY_RESERVED_PREFIXES)


def _post_success(subtype: str) -> dict:
    return {
        "subtype": subtype,
        "msg_subtype": MsgSubtype.ARTIFACT_RESPONSE,
        "allowed_fields": list(ALLOWED_FIELDS[subtype]),
        "forbidden_fields": list(FORBIDDEN_FIELDS),
    }


def _message(artifact: dict) -> dict:
    return {"msg_subtype": MsgSubtype.ARTIFACT_FORM, "artifact": artifact}


def _schema(*, creating: bool) -> dict:
    """Return the creation form's schema (spec 001 template); for an update, nothing required and no custom_id."""
    schema = {
        "display_name": {"type": "string", "min": 2, "max": 32, "required": creating},
        "custom_id": {"type": "string", "pattern": CUSTOM_ID_PATTERN, "required": False, "reserved_prefixes": _reserved()},
        "bio": {"type": "string", "max": 500},
        "avatar_url": {"type": "url", "optional": True},
        "category": {"type": "enum", "values": list(IdentityCategory.values)},
        "connection_mode": {"type": "enum", "values": list(ConnectionMode.values), "required": creating},
        "webhook_url": {"type": "url", "required_if": {"connection_mode": ConnectionMode.WEBHOOK}},
        "health_check_url": {"type": "url", "optional": True},
    }
    if not creating:
        del schema["custom_id"]
    return schema


def agent_summary(profile) -> dict:
    """Return what a form or card shows of an identity agent: ids, name, mode, health, keys."""
    return {
        "agent_id": profile.agent_id,
        "custom_id": profile.agent.name,
        "display_name": profile.display_name,
        "connection_mode": profile.connection_mode,
        "health": profile.health,
    }


def creation_form(*, values: dict | None = None) -> dict:
    """Return the `agent_creation_form` message (spec 001 template, this platform's endpoints).

    Example: `creation_form(values={"display_name": "Weather"})["artifact"]["client_action"]["endpoint"]`
    → `"POST /v1/identity/agents"`.
    """
    return _message({
        "subtype": ArtifactSubtype.AGENT_CREATION_FORM,
        "title_i18n_key": "agent.creation.title",
        "title": "Create an agent",
        "client_action": {
            "endpoint": CREATE,
            "auth": ClientAuth.USER_JWT,
            "allowed_endpoints": [CREATE, KEYS_REGISTER],
            "after_success": {"endpoint": KEYS_REGISTER, "auth": ClientAuth.AGENT_TOKEN, "params_from_response": {":id": "$.agent_id"}},
        },
        "schema": _schema(creating=True),
        "values": _clean_values(values),
        "post_success_artifact": _post_success(ArtifactSubtype.AGENT_CREATED),
    })


def update_form(profile) -> dict:
    """Return the `agent_update_form` message for `profile`, prefilled with its current fields."""
    return _message({
        "subtype": ArtifactSubtype.AGENT_UPDATE_FORM,
        "title_i18n_key": "agent.update.title",
        "title": f"Change {profile.display_name}",
        "agent": agent_summary(profile),
        "client_action": {"endpoint": UPDATE, "auth": ClientAuth.USER_JWT, "allowed_endpoints": [UPDATE], "params": {":id": profile.agent_id}},
        "schema": _schema(creating=False),
        "values": {
            "display_name": profile.display_name, "bio": profile.bio, "avatar_url": profile.avatar_url,
            "category": profile.category, "connection_mode": profile.connection_mode, "webhook_url": profile.webhook_url,
            "health_check_url": profile.health_check_url,
        },
        "post_success_artifact": _post_success(ArtifactSubtype.AGENT_UPDATED),
    })


def deletion_confirm(profile, *, preview: dict) -> dict:
    """Return the `agent_deletion_confirm` message with the cascade preview `{affected_h2a_count, affected_users_count}`."""
    return _message({
        "subtype": ArtifactSubtype.AGENT_DELETION_CONFIRM,
        "title_i18n_key": "agent.deletion.title",
        "title": f"Delete {profile.display_name}?",
        "agent": agent_summary(profile),
        "cascade_preview": {"affected_h2a_count": int(preview["affected_h2a_count"]),
                            "affected_users_count": int(preview["affected_users_count"])},
        "client_action": {"endpoint": DELETE, "auth": ClientAuth.USER_JWT, "allowed_endpoints": [DELETE], "params": {":id": profile.agent_id}},
        "post_success_artifact": _post_success(ArtifactSubtype.AGENT_DELETED),
    })


def rotate_confirm(profile) -> dict:
    """Return the `agent_token_rotate_confirm` message: normal (grace period) or emergency rotation."""
    return _message({
        "subtype": ArtifactSubtype.AGENT_TOKEN_ROTATE_CONFIRM,
        "title_i18n_key": "agent.token_rotate.title",
        "title": f"Rotate the token of {profile.display_name}?",
        "agent": agent_summary(profile),
        "grace_seconds": int(settings.AGENTS_IDENTITY_GRACE_SECONDS),
        "client_action": {"endpoint": ROTATE, "auth": ClientAuth.USER_JWT, "allowed_endpoints": [ROTATE], "params": {":id": profile.agent_id}},
        "schema": {"emergency": {"type": "boolean", "default": False}},
        "post_success_artifact": _post_success(ArtifactSubtype.AGENT_TOKEN_ROTATED),
    })


def list_display(profiles: list, *, keyed: set[str]) -> dict:
    """Return the `agent_list_display` message: the user's agents (`keyed`: ids with valid public keys)."""
    return _message({
        "subtype": ArtifactSubtype.AGENT_LIST_DISPLAY,
        "title_i18n_key": "agent.list.title",
        "title": "Your agents",
        "agents": [{**agent_summary(p), "keys_registered": p.agent_id in keyed} for p in profiles],
    })


def _clean_values(values: dict | None) -> dict:
    """Keep the prefill values that are creation-form fields with string values (a model's guesses)."""
    fields = _schema(creating=True)
    return {k: v for k, v in (values or {}).items() if k in fields and isinstance(v, str) and len(v) <= 2048}


def as_op(message: dict) -> dict:
    """Return the op handing artifact `message` to the client."""
    return {"name": ARTIFACT_OP, "args": message}
