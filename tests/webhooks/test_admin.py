"""The admin shows the acting org's webhook models read-only, never a secret."""

import pytest
from django.test import Client

from tests.webhooks.conftest import create_endpoint, post
from webhooks.models import Endpoint

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_delivery")]


def test_org_admin_sees_webhook_models_read_only_without_secrets(org_a, org_b, receiver):
    created = create_endpoint(org_a, receiver.url, description="mine-endpoint")
    receiver.secret = created["secret"]
    create_endpoint(org_b, receiver.url, description="other-org-endpoint")
    post(org_a.client, f"/v1/agents/webhooks/{created['id']}/test")
    client = Client()
    client.force_login(org_a.user)
    for model in ["endpoint", "eventdelivery", "runcallback", "targetstatusseen"]:
        page = client.get(f"/admin/webhooks/{model}/")
        assert page.status_code == 200, model
        assert b"other-org-endpoint" not in page.content
        assert client.get(f"/admin/webhooks/{model}/add/").status_code == 403, model
    with org_a.context():
        endpoint = Endpoint.objects.get()
    detail = client.get(f"/admin/webhooks/endpoint/{endpoint.pk}/change/")
    assert detail.status_code == 200 and b"mine-endpoint" in detail.content
    assert created["secret"].encode() not in detail.content and endpoint.secret_encrypted.encode() not in detail.content
    assert client.get("/admin/webhooks/eventdelivery/1/change/").status_code == 200
