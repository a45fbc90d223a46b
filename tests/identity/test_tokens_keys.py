"""Agent tokens (bcrypt, shown once), key registration, rotation with grace (spec 001)."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from django.db import connections
from django.utils import timezone

from identity.models import AgentCredential, AgentKeySet, TokenRotation
from identity.passwords import check_password, hash_password
from identity.secretbox import decrypt_secret
from tenancy import stores
from tests.identity.conftest import AgentKeys, bearer, create_agent, post
from tests.support.stored import every_row_as_text
from tests.support.files import file_bytes

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def _register(client, agent_id, token, body):
    return post(client, f"/v1/identity/agents/{agent_id}/keys/register", body, **bearer(token))


def test_one_password_helper_hashes_with_bcrypt_cost_10():
    hashed = hash_password("s3cret")
    assert hashed.startswith("$2b$10$") and len(hashed) == 60
    assert check_password("s3cret", hashed) and not check_password("other", hashed)


def test_token_is_stored_as_bcrypt_and_nowhere_in_plain_text(org_a, agent_keys, store_kind):
    created = create_agent(org_a.client, connection_mode="websocket").json()
    token = created["agent_token"]
    secret = token.rsplit("_", 1)[1]
    with org_a.context() as alias:
        credential = AgentCredential.objects.get(agent_id=created["agent_id"])
        assert credential.token_hash.startswith("$2b$10$")
        assert check_password(secret, credential.token_hash)
        if store_kind == "postgres":
            # No row of any table of the org database or the default database holds it.
            for using in (alias, "default"):
                rows = every_row_as_text(connections[using])
                assert rows and not any(secret in row or token in row for row in rows), using
            return
        connections[alias].close()
    # No table, WAL or journal of the org store or the default database holds the token or its secret.
    store_dir = stores.store_path(org_a.slug).parent
    files = [p for p in store_dir.iterdir() if p.is_file()]
    default_db = connections["default"].settings_dict["NAME"]
    from pathlib import Path

    files += [p for p in Path(default_db).parent.glob(Path(default_db).name + "*")]
    assert files
    for path in files:
        data = file_bytes(path)
        assert secret.encode() not in data, path
        assert token.encode() not in data, path



def test_keys_register_with_the_agent_token_stores_real_keys(org_a, agent_keys, settings):
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    created = create_agent(org_a.client, connection_mode="webhook", webhook_url="http://127.0.0.1:9/hook").json()
    response = _register(org_a.client, created["agent_id"], created["agent_token"], agent_keys.body(webhook=True))
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["public_key"] == agent_keys.body(webhook=True)["public_key"]
    assert body["webhook_secret_set"] is True and "webhook_secret" not in body
    with org_a.context():
        keyset = AgentKeySet.objects.get(agent_id=created["agent_id"])
        assert agent_keys.webhook_secret not in keyset.webhook_secret_encrypted  # Fernet, not plain
        assert decrypt_secret(keyset.webhook_secret_encrypted) == agent_keys.webhook_secret
    view = org_a.client.get(f"/v1/identity/agents/{created['agent_id']}").json()
    assert [k["signing_public_key"] for k in view["public_keys"]] == [body["signing_public_key"]]


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


@pytest.mark.parametrize(
    "override, field",
    [
        ({"public_key": _b64(bytes(32))}, "public_key"),  # all-zero X25519
        ({"public_key": _b64((1).to_bytes(32, "little"))}, "public_key"),  # low-order X25519
        ({"public_key": _b64(b"\x01" * 31)}, "public_key"),  # wrong length
        ({"public_key": "not base64!!"}, "public_key"),
        ({"signing_public_key": _b64(bytes(32))}, "signing_public_key"),  # small-order Ed25519
        ({"signing_public_key": _b64((1).to_bytes(32, "little"))}, "signing_public_key"),  # the identity point
        ({"signing_public_key": _b64(b"\xff" * 32)}, "signing_public_key"),  # not canonical
        ({"signing_public_key": _b64(b"\x02" * 33)}, "signing_public_key"),
        ({"webhook_secret": "whsec_" + _b64(b"short")}, "webhook_secret"),
        ({"webhook_secret": "plain-secret-without-prefix-000000000"}, "webhook_secret"),
        ({"webhook_secret": None}, "webhook_secret"),
    ],
)
def test_bad_keys_answer_400_and_store_nothing(org_a, settings, override, field):
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    created = create_agent(org_a.client, connection_mode="webhook", webhook_url="http://127.0.0.1:9/hook").json()
    body = {**AgentKeys().body(webhook=True), **override}
    if body.get("webhook_secret") is None:
        body.pop("webhook_secret")
    response = _register(org_a.client, created["agent_id"], created["agent_token"], body)
    assert response.status_code == 400, response.json()
    assert field in response.json()["error"]
    with org_a.context():
        assert not AgentKeySet.objects.exists()


def test_websocket_agent_may_not_send_a_webhook_secret(org_a, agent_keys):
    created = create_agent(org_a.client).json()
    response = _register(org_a.client, created["agent_id"], created["agent_token"], agent_keys.body(webhook=True))
    assert response.status_code == 400
    assert _register(org_a.client, created["agent_id"], created["agent_token"], agent_keys.body(webhook=False)).status_code == 200


def test_agent_token_routes_refuse_user_credentials_and_other_agents_tokens(org_a, org_b, agent_keys):
    first = create_agent(org_a.client).json()
    second = create_agent(org_a.client).json()
    other_org = create_agent(org_b.client).json()
    path = f"/v1/identity/agents/{first['agent_id']}/keys/register"
    body = agent_keys.body(webhook=False)
    assert post(org_a.client, path, body).status_code == 403  # the user's API key is not an agent token
    wrong = post(org_a.client, path, body, **bearer(second["agent_token"]))
    assert wrong.status_code == 403 and wrong.json()["code"] == "forbidden"
    assert post(org_a.client, path, body, **bearer(other_org["agent_token"])).status_code == 403
    forged = first["agent_token"][:-4] + "0000"
    assert post(org_a.client, path, body, **bearer(forged)).status_code == 403
    assert post(org_a.client, path, body, **bearer("agt_nosuchorg_0123456789abcdef_" + "0" * 48)).status_code == 403
    assert not stores.store_exists("nosuchorg")
    with org_a.context():
        assert not AgentKeySet.objects.exists()


def test_normal_rotation_keeps_the_old_token_and_keys_for_the_grace(org_a, agent_keys):
    created = create_agent(org_a.client).json()
    agent_id, old = created["agent_id"], created["agent_token"]
    assert _register(org_a.client, agent_id, old, agent_keys.body(webhook=False)).status_code == 200
    response = post(org_a.client, f"/v1/identity/agents/{agent_id}/token/regenerate", {"emergency": False})
    assert response.status_code == 200, response.json()
    new = response.json()["agent_token"]
    assert new != old and response.json()["previous_valid_until"]
    new_keys = AgentKeys()
    assert _register(org_a.client, agent_id, old, new_keys.body(webhook=False)).status_code == 200  # old token still works
    view = org_a.client.get(f"/v1/identity/agents/{agent_id}").json()
    assert len(view["public_keys"]) == 2  # the old set stays valid through the grace
    # The grace ends: the old token is refused with 403, the new one works.
    with org_a.context():
        AgentCredential.objects.filter(expires_at__isnull=False).update(expires_at=timezone.now() - timedelta(seconds=1))
        AgentKeySet.objects.filter(expires_at__isnull=False).update(expires_at=timezone.now() - timedelta(seconds=1))
    expired = _register(org_a.client, agent_id, old, new_keys.body(webhook=False))
    assert expired.status_code == 403 and "grace" in expired.json()["error"]
    assert _register(org_a.client, agent_id, new, new_keys.body(webhook=False)).status_code == 200
    assert len(org_a.client.get(f"/v1/identity/agents/{agent_id}").json()["public_keys"]) == 1


def test_emergency_rotation_revokes_the_old_token_and_keys_at_once(org_a, agent_keys):
    created = create_agent(org_a.client).json()
    agent_id, old = created["agent_id"], created["agent_token"]
    _register(org_a.client, agent_id, old, agent_keys.body(webhook=False))
    new = post(org_a.client, f"/v1/identity/agents/{agent_id}/token/regenerate", {"emergency": True}).json()["agent_token"]
    refused = _register(org_a.client, agent_id, old, agent_keys.body(webhook=False))
    assert refused.status_code == 403 and "revoked" in refused.json()["error"]
    assert org_a.client.get(f"/v1/identity/agents/{agent_id}").json()["public_keys"] == []
    assert _register(org_a.client, agent_id, new, agent_keys.body(webhook=False)).status_code == 200


def test_rotation_is_limited_to_5_per_24h_from_the_durable_log(org_a):
    created = create_agent(org_a.client).json()
    path = f"/v1/identity/agents/{created['agent_id']}/token/regenerate"
    with org_a.context():  # two rotations 25 h ago do not count
        for _ in range(2):
            TokenRotation.objects.create(agent_id=created["agent_id"], created_at=timezone.now() - timedelta(hours=25))
    for _ in range(5):
        assert post(org_a.client, path, {}).status_code == 200
    response = post(org_a.client, path, {"emergency": True})
    assert response.status_code == 429
    assert response.json()["code"] == "rotation_limit" and response.json()["retry_after"] > 0
    with org_a.context():
        assert TokenRotation.objects.filter(agent_id=created["agent_id"]).count() == 7
        assert AgentCredential.objects.filter(agent_id=created["agent_id"]).count() == 6


def test_regenerate_refuses_a_non_boolean_emergency(org_a):
    created = create_agent(org_a.client).json()
    response = post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/token/regenerate", {"emergency": "maybe"})
    assert response.status_code == 400
    with org_a.context():
        assert not TokenRotation.objects.exists()
