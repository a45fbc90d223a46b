"""The guided-creation pages rendered server side: client anomalies (org admins only, console and
Django admin) and the agent-keys page."""

import base64

import pytest
from django.test import Client

from tests.console.conftest import signed_in
from tests.identity.conftest import post

pytestmark = pytest.mark.django_db


def report(org, **body):
    response = post(org.client, "/v1/identity/anomalies", {"kind": "endpoint_not_allowed", "endpoint": "POST /v1/agents/evil", **body})
    assert response.status_code == 201, response.content


def test_org_admins_see_the_orgs_anomalies_and_members_are_refused(org_a, org_b, member):
    report(org_a, conversation_id="conv_abc", detail={"where": "client_action.endpoint"})
    report(org_b, endpoint="POST /v1/agents/other-org")

    page = signed_in(org_a).get("/console/identity/anomalies/")

    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-kind="endpoint_not_allowed"' in html and "POST /v1/agents/evil" in html and "where=client_action.endpoint" in html
    assert "/console/chat/conv_abc/" in html and "other-org" not in html
    assert signed_in(member).get("/console/identity/anomalies/").status_code == 403
    assert "Client anomalies" not in signed_in(member).get("/console/").content.decode()


def test_an_anomaly_with_a_slash_in_its_conversation_id_is_refused_and_a_stored_one_renders(org_a):
    refused = post(org_a.client, "/v1/identity/anomalies", {"kind": "endpoint_not_allowed", "conversation_id": "a/b"})
    assert refused.status_code == 400 and refused.json()["fields"][0]["field"] == "conversation_id"
    from django.utils import timezone

    from identity.models import ClientAnomaly

    with org_a.context():  # a row stored before the pattern held
        ClientAnomaly.objects.create(user_id="u", kind="endpoint_not_allowed", conversation_id="../x/<b>y</b>", detail={}, created_at=timezone.now())
    page = signed_in(org_a).get("/console/identity/anomalies/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "../x/&lt;b&gt;y&lt;/b&gt;" in html and "<b>y</b>" not in html and 'href="/console/chat/../' not in html


def test_the_django_admin_lists_anomalies_and_backups_read_only_without_the_blob(org_a):
    report(org_a)
    secret_blob = base64.b64encode(b"ciphertext-that-stays-opaque").decode()
    assert org_a.client.put("/v1/identity/backup", {"encrypted_backup_blob_v2": secret_blob}, content_type="application/json").status_code == 200
    client = Client()
    client.force_login(org_a.user)
    for model in ("clientanomaly", "keybackup"):
        assert client.get(f"/admin/identity/{model}/").status_code == 200, model
        assert client.get(f"/admin/identity/{model}/add/").status_code == 403, model
    assert b"POST /v1/agents/evil" in client.get("/admin/identity/clientanomaly/").content
    detail = client.get("/admin/identity/keybackup/1/change/")
    assert detail.status_code == 200 and secret_blob.encode() not in detail.content


def test_the_keys_page_and_the_chat_page_load_the_executor(member):
    keys = signed_in(member).get("/console/identity/keys/")
    chat = signed_in(member).get("/console/chat/")
    assert keys.status_code == 200 and b"keystore.js" in keys.content and b'id="restore-form"' in keys.content
    assert all(name in chat.content for name in (b"client_action.js", b"agent_keys.js", b"keystore.js", b"artifacts.js"))
