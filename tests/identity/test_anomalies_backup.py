"""POST /v1/identity/anomalies (client_action refusals, spec 001) and PUT/GET/DELETE /v1/identity/backup
(the one opaque encrypted_backup_blob_v2 per user)."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client

from identity.models import ClientAnomaly, KeyBackup
from tests.identity.conftest import post

pytestmark = pytest.mark.django_db


def put(client, body):
    return client.put("/v1/identity/backup", json.dumps(body), content_type="application/json")


def blob(size: int = 96) -> str:
    return base64.b64encode(bytes(range(256)) * (size // 256) + bytes(size % 256)).decode()


def test_an_anomaly_report_is_stored_with_its_reporter(org_a):
    response = post(org_a.client, "/v1/identity/anomalies", {
        "kind": "endpoint_not_allowed", "artifact_subtype": "agent_creation_form", "endpoint": "POST /v1/agents/evil",
        "conversation_id": "conv_1", "detail": {"where": "client_action.endpoint"}})

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["kind"], body["endpoint"], body["user_id"], body["detail"]) == (
        "endpoint_not_allowed", "POST /v1/agents/evil", org_a.user.username, {"where": "client_action.endpoint"})
    with org_a.context():
        [row] = ClientAnomaly.objects.all()
        assert (row.kind, row.user_id, row.artifact_subtype, row.conversation_id) == ("endpoint_not_allowed", org_a.user.username, "agent_creation_form", "conv_1")


@pytest.mark.parametrize("body, status", [
    ({"kind": "made_up"}, 400),
    ({"kind": "auth_refused", "colour": "red"}, 400),
    ({"kind": "auth_refused", "detail": {"a": {"nested": 1}}}, 400),
    ({"kind": "auth_refused", "endpoint": "x" * 301}, 400),
    ({"kind": "auth_refused", "detail": {"k": "agt_a_0123456789abcdef_" + "ab" * 24}}, 422),
    # attack review: a credential in conversation_id (≤ 64 characters hold a GitHub token) was stored
    ({"kind": "auth_refused", "conversation_id": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"}, 422),
])
def test_a_bad_or_secret_bearing_anomaly_report_is_refused_and_nothing_stored(org_a, body, status):
    response = post(org_a.client, "/v1/identity/anomalies", body)
    assert response.status_code == status, response.content
    assert set(response.json()) >= {"status", "code", "error"}
    with org_a.context():
        assert not ClientAnomaly.objects.exists()


def test_anomalies_need_a_principal():
    assert post(Client(), "/v1/identity/anomalies", {"kind": "auth_refused"}).status_code == 403


def test_the_backup_round_trips_and_is_replaced_per_user(org_a, org_b):
    assert org_a.client.get("/v1/identity/backup").status_code == 404
    first, second = blob(96), blob(300)

    stored = put(org_a.client, {"encrypted_backup_blob_v2": first})
    assert stored.status_code == 200, stored.content
    assert stored.json()["size_bytes"] == len(first) and "encrypted_backup_blob_v2" not in stored.json()
    assert put(org_a.client, {"encrypted_backup_blob_v2": second}).status_code == 200

    got = org_a.client.get("/v1/identity/backup")
    assert got.status_code == 200 and got.json()["encrypted_backup_blob_v2"] == second
    with org_a.context():
        assert [(b.user_id, b.blob) for b in KeyBackup.objects.all()] == [(org_a.user.username, second)]
    assert org_b.client.get("/v1/identity/backup").status_code == 404  # another org's user: none
    assert org_a.client.delete("/v1/identity/backup").status_code == 204
    assert org_a.client.get("/v1/identity/backup").status_code == 404
    assert org_a.client.delete("/v1/identity/backup").status_code == 404


def test_a_backup_over_the_limit_is_413_and_not_stored(org_a, settings):
    settings.AGENTS_IDENTITY_BACKUP_MAX_BYTES = 200
    response = put(org_a.client, {"encrypted_backup_blob_v2": blob(300)})
    assert response.status_code == 413 and response.json()["limit"] == 200
    with org_a.context():
        assert not KeyBackup.objects.exists()


@pytest.mark.parametrize("body", [{"encrypted_backup_blob_v2": "not base64!"}, {"encrypted_backup_blob_v2": ""}, {}, {"blob": "AAAA"},
                                  {"encrypted_backup_blob_v2": 12}])
def test_a_backup_that_is_not_base64_is_400(org_a, body):
    response = put(org_a.client, body)
    assert response.status_code == 400, response.content
    with org_a.context():
        assert not KeyBackup.objects.exists()
