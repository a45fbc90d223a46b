"""Capability manifests on the identity API (docs/manifests.md): an identity agent registers its
signed A2A card with its token, every vector is accepted or refused exactly as written down
(400 naming the field), members of the org read it, and the agent's A2A card address serves it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agents_identity.keys import key_from_jwk
from agents_identity.manifest import build_manifest, sign_manifest
from identity.models import AgentManifest
from tests.identity.conftest import AgentKeys, bearer, create_agent, post, raw_public

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "docs" / "manifests-v1-vectors.json").read_text())
SIGNING = key_from_jwk(VECTORS["agent_keys"][0]["ed25519_private_jwk"])


def agent_with_vector_key(org, *, mode: str = "webhook") -> tuple[dict, str]:
    """Create an identity agent and register the vectors' signing key as its own; return `(agent, token)`."""
    created = create_agent(org.client, connection_mode=mode, custom_id="echo_bot", webhook_url="https://agent.example/hook"
                           if mode == "webhook" else None).json()
    keys = AgentKeys(ed25519=SIGNING, x25519=X25519PrivateKey.generate())
    registered = post(org.client, f"/v1/identity/agents/{created['agent_id']}/keys/register", keys.body(webhook=mode == "webhook"),
                      **bearer(created["agent_token"]))
    assert registered.status_code == 200, registered.content
    return created, created["agent_token"]


def register(org, agent: dict, token: str, manifest) -> object:
    return post(org.client, f"/v1/identity/agents/{agent['agent_id']}/manifest", {"manifest": manifest}, **bearer(token))


def stored(org) -> list[AgentManifest]:
    with org.context():
        return list(AgentManifest.objects.all())


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=lambda v: v["name"])
def test_every_valid_vector_is_registered_and_read_back(org_a, vector):
    agent, token = agent_with_vector_key(org_a)

    created = register(org_a, agent, token, vector["manifest"])

    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["signing_kid"], body["signing_key_status"], body["manifest"]) == (vector["kid"], "current", vector["manifest"])
    assert body["verification"] == {"verifies": True, "kid": vector["kid"], "reason": None, "field": None}
    read = org_a.client.get(f"/v1/identity/agents/{agent['agent_id']}/manifest")
    assert read.status_code == 200 and read.json()["manifest"] == vector["manifest"]
    assert read.json()["verification"]["verifies"] is True
    assert register(org_a, agent, token, vector["manifest"]).status_code == 200  # the same again replaces it
    assert [m.signing_kid for m in stored(org_a)] == [vector["kid"]]


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_every_invalid_vector_is_refused_naming_the_field(org_a, vector):
    agent, token = agent_with_vector_key(org_a)

    refused = register(org_a, agent, token, vector["manifest"])

    assert refused.status_code == 400, refused.content
    body = refused.json()
    assert (body["code"], body["reason"], body["field"]) == ("manifest_invalid", vector["reason"], vector["field"])
    assert vector["field"] in body["error"]
    assert stored(org_a) == []


def _signed(**overrides) -> dict:
    card = build_manifest(name="echo_bot", description="Echoes", transports=["webhook"],
                          messages_url="https://agents.example/v1/identity/agents/x/messages")
    card.update(overrides)
    return card


@pytest.mark.parametrize(("card", "field"), [
    ({**_signed(), "colour": "blue"}, "colour"),
    ({**_signed(), "capabilities": {"streaming": "yes"}}, "capabilities.streaming"),
    ({**_signed(), "skills": []}, "skills"),
    ("not a card", "manifest"),
])
def test_a_schema_error_is_refused_naming_the_field(org_a, card, field):
    agent, token = agent_with_vector_key(org_a)
    manifest = sign_manifest(card, SIGNING) if isinstance(card, dict) and card.get("skills") and "colour" not in card and \
        not isinstance(card.get("capabilities", {}).get("streaming"), str) else card

    refused = register(org_a, agent, token, manifest)

    assert refused.status_code == 400, refused.content
    assert (refused.json()["reason"], refused.json()["field"]) == ("schema", field)
    assert stored(org_a) == []


def test_a_card_not_in_proto3_form_is_refused_before_its_signature_is_checked(org_a):
    agent, token = agent_with_vector_key(org_a)
    card = _signed()
    card["capabilities"]["extensions"][0]["required"] = False  # proto3 JSON leaves a false `required` out
    signed = sign_manifest(card, SIGNING)

    refused = register(org_a, agent, token, signed)

    assert refused.status_code == 400
    assert refused.json()["field"] == "capabilities.extensions[0].required"


def test_the_transports_must_include_how_the_agent_connects(org_a):
    agent, token = agent_with_vector_key(org_a, mode="websocket")
    manifest = sign_manifest(_signed(), SIGNING)  # says webhook only

    refused = register(org_a, agent, token, manifest)

    assert refused.status_code == 400 and refused.json()["field"] == "capabilities.extensions[0].params.transports"


def test_only_the_agents_own_token_registers_and_a_foreign_agent_is_404(org_a, org_b):
    agent, token = agent_with_vector_key(org_a)
    other, other_token = create_agent(org_a.client, connection_mode="websocket", custom_id="other_bot").json(), None
    manifest = VECTORS["valid"][0]["manifest"]

    assert register(org_a, agent, other["agent_token"], manifest).status_code == 403
    assert org_a.client.get(f"/v1/identity/agents/{agent['agent_id']}/manifest").status_code == 404  # none yet
    assert register(org_a, agent, token, manifest).status_code == 201
    assert org_b.client.get(f"/v1/identity/agents/{agent['agent_id']}/manifest").status_code == 404
    assert org_b.client.get("/v1/agents/echo_bot/a2a/.well-known/agent-card.json").status_code == 404
    for ref in ("agent_nope", "no_such_bot"):  # an unknown agent: the same 404, in the one error shape
        unknown = org_a.client.get(f"/v1/identity/agents/{ref}/manifest")
        assert unknown.status_code == 404 and unknown.json()["code"] == "not_found"
        assert register(org_a, {"agent_id": ref}, token, manifest).status_code == 403  # never confirms an id (issue 50)


def test_a_credential_in_the_manifest_is_refused(org_a):
    agent, token = agent_with_vector_key(org_a)
    manifest = sign_manifest(_signed(description="deploy with ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"), SIGNING)

    refused = register(org_a, agent, token, manifest)

    assert refused.status_code == 422 and refused.json()["code"] == "secret_in_transcript"
    assert stored(org_a) == []


def test_the_agents_a2a_card_address_serves_its_signed_manifest(org_a):
    agent, token = agent_with_vector_key(org_a)
    assert org_a.client.get("/v1/agents/echo_bot/a2a/.well-known/agent-card.json").status_code == 404  # none registered
    register(org_a, agent, token, VECTORS["valid"][1]["manifest"])

    card = org_a.client.get("/v1/agents/echo_bot/a2a/.well-known/agent-card.json")

    assert card.status_code == 200 and card.json() == VECTORS["valid"][1]["manifest"]


def test_after_an_emergency_rotation_the_manifest_reads_as_signed_by_a_revoked_key(org_a):
    agent, token = agent_with_vector_key(org_a)
    register(org_a, agent, token, copy.deepcopy(VECTORS["valid"][0]["manifest"]))

    rotated = post(org_a.client, f"/v1/identity/agents/{agent['agent_id']}/token/regenerate", {"emergency": True})

    assert rotated.status_code == 200
    read = org_a.client.get(f"/v1/identity/agents/{agent['agent_id']}/manifest").json()
    assert read["signing_key_status"] == "revoked"
    assert read["verification"] == {"verifies": False, "kid": None, "reason": "bad_signature", "field": "signatures"}
    assert [m.signing_kid for m in stored(org_a)] == [VECTORS["agent_keys"][0]["kid"]]  # kept, read as not verifying


def test_after_the_agent_registers_new_keys_its_old_manifest_no_longer_verifies(org_a):
    agent, token = agent_with_vector_key(org_a)
    register(org_a, agent, token, copy.deepcopy(VECTORS["valid"][0]["manifest"]))
    new_keys = AgentKeys()
    assert post(org_a.client, f"/v1/identity/agents/{agent['agent_id']}/keys/register", new_keys.body(webhook=True),
                **bearer(token)).status_code == 200  # the previous set is superseded at once

    read = org_a.client.get(f"/v1/identity/agents/{agent['agent_id']}/manifest").json()

    assert (read["signing_key_status"], read["verification"]["verifies"], read["verification"]["reason"]) == ("revoked", False, "bad_signature")
    resigned = register(org_a, agent, token, sign_manifest(_signed(), new_keys.ed25519))
    assert resigned.status_code == 200 and resigned.json()["verification"]["verifies"] is True


def test_a_stored_card_changed_after_registration_does_not_verify(org_a):
    agent, token = agent_with_vector_key(org_a)
    register(org_a, agent, token, copy.deepcopy(VECTORS["valid"][0]["manifest"]))
    with org_a.context():  # a write around the API (a restored backup, a hand edit): the signature no longer covers it
        row = AgentManifest.objects.get()
        row.card = {**row.card, "description": "Now says something else"}
        row.save()

    read = org_a.client.get(f"/v1/identity/agents/{agent['agent_id']}/manifest").json()

    assert (read["signing_key_status"], read["verification"]["verifies"], read["verification"]["field"]) == ("current", False, "signatures")
