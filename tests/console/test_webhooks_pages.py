"""The console's webhook pages (issue 32 item 4): org admins only, secret shown once, another
org's endpoint 404, the dashboard's alert for an endpoint disabled after failing 24 h."""

import pytest

from tests.console.conftest import signed_in
from webhooks.models import Endpoint

pytestmark = pytest.mark.django_db


@pytest.fixture
def allow_loopback(settings):
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]


def test_a_plain_member_gets_403_and_nothing_is_created(member, allow_loopback):
    client = signed_in(member)
    assert client.get("/console/webhooks/").status_code == 403
    assert client.post("/console/webhooks/", {"url": "http://127.0.0.1:9/h", "events": ["run.finished"]}).status_code == 403
    with member.context():
        assert Endpoint.objects.count() == 0


def test_create_shows_the_secret_once_and_a_bad_url_is_a_form_error(org_a, org_b, allow_loopback):
    client = signed_in(org_a)
    bad = client.post("/console/webhooks/", {"url": "https://10.0.0.1/h", "events": ["run.finished"]})
    assert bad.status_code == 400 and "url" in bad.content.decode()
    created = client.post("/console/webhooks/", {"url": "http://127.0.0.1:9/h", "events": ["run.finished", "target.offline"]})
    html = created.content.decode()
    assert created.status_code == 200 and created["Cache-Control"] == "no-store"
    with org_a.context():
        endpoint = Endpoint.objects.get()
    secret = html.split('id="new-secret" class="secret">', 1)[1].split("<", 1)[0]
    assert secret.startswith("whsec_") and endpoint.events == ["run.finished", "target.offline"]
    assert secret not in client.get("/console/webhooks/").content.decode()
    # another org's endpoint: 404 on every page and action
    other = signed_in(org_b)
    assert other.get(f"/console/webhooks/{endpoint.public_id}/").status_code == 404
    assert other.post(f"/console/webhooks/{endpoint.public_id}/delete/").status_code == 404
    with org_a.context():
        assert Endpoint.objects.count() == 1


def test_the_dashboard_alerts_an_admin_to_an_endpoint_disabled_for_failing(org_a, allow_loopback):
    client = signed_in(org_a)
    client.post("/console/webhooks/", {"url": "http://127.0.0.1:9/h", "events": ["run.finished"]})
    assert "webhook-failing" not in client.get("/console/").content.decode()
    with org_a.context():
        Endpoint.objects.update(enabled=False, disabled_reason="failing")
    html = client.get("/console/").content.decode()
    assert "webhook-failing" in html and "http://127.0.0.1:9/h" in html and "failed every delivery for 24 hours" in html
    with org_a.context():
        Endpoint.objects.update(disabled_reason="gone")  # its receiver answered 410 (issue 52)
    html = client.get("/console/").content.decode()
    assert "webhook-failing" in html and "answered 410 Gone and was disabled" in html
    assert "disabled: 410 Gone" in client.get("/console/webhooks/").content.decode()


def test_the_endpoint_form_shows_every_refused_field_at_once(org_a, allow_loopback):
    import json

    from webhooks.services import MAX_DESCRIPTION_CHARS

    client = signed_in(org_a)
    response = client.post("/console/webhooks/", {"url": "", "description": "d" * (MAX_DESCRIPTION_CHARS + 1)})
    assert response.status_code == 400
    errors = response.context["field_errors"]
    assert list(errors) == ["url", "events", "description"]
    html = response.content.decode()
    for field, message in errors.items():
        assert f'<li data-field="{field}">{message}</li>' in html
        assert f'<p class="field-error" id="id_{field}-error">{message}</p>' in html
    # each is what the API answers for that field alone
    api = org_a.client.post("/v1/agents/webhooks", json.dumps({"url": "http://127.0.0.1:9/h", "events": []}), content_type="application/json")
    assert api.status_code == 400 and api.json()["error"] == errors["events"]
    with org_a.context():
        assert Endpoint.objects.count() == 0
