"""The admin shows the acting org's identity models read-only, never a token hash or secret."""

import pytest
from django.test import Client

from identity.models import AgentCredential
from tests.identity.conftest import create_agent, pair

pytestmark = pytest.mark.django_db


def test_org_admin_sees_identity_models_read_only_without_secrets(org_a, org_b, settings):
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    mine = create_agent(org_a.client, custom_id="seen_by_admin", connection_mode="webhook", webhook_url="http://127.0.0.1:9/h").json()
    create_agent(org_b.client, custom_id="other_org_agent")
    both = pair(org_a.client, org_a.user.get_username(), mine, webhook=True)
    keys = both.agent_keys
    sealed = both.to_agent()
    assert both.send_to_agent(envelope=sealed).status_code == 202
    client = Client()
    client.force_login(org_a.user)
    for model in ["identityprofile", "agentcredential", "agentkeyset", "tokenrotation", "relation", "envelope", "delivery", "inboxitem", "identitylock", "userkeyset"]:
        page = client.get(f"/admin/identity/{model}/")
        assert page.status_code == 200, model
        assert b"other_org_agent" not in page.content
        assert client.get(f"/admin/identity/{model}/add/").status_code == 403, model
    assert b"seen_by_admin" in client.get("/admin/identity/identityprofile/").content
    with org_a.context():
        credential = AgentCredential.objects.get(agent_id=mine["agent_id"])
    detail = client.get(f"/admin/identity/agentcredential/{credential.pk}/change/")
    assert detail.status_code == 200 and credential.token_hash.encode() not in detail.content
    assert keys.webhook_secret.encode() not in client.get("/admin/identity/agentkeyset/1/change/").content
    assert sealed.encode() not in client.get("/admin/identity/envelope/1/change/").content
    assert b"userkeyset" in client.get("/admin/identity/").content  # the user keys model is listed
    with org_a.context():
        from identity.models import UserKeySet

        user_keyset = UserKeySet.objects.get(user_id=org_a.user.get_username())
    assert user_keyset.public_key.encode() in client.get(f"/admin/identity/userkeyset/{user_keyset.pk}/change/").content
