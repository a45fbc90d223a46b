"""Org webhook endpoints: /v1/agents/webhooks (issue 32 item 1) — admins only, secret shown once,
rotation, test send, delivery log and redeliver, the reserved agent name."""

from __future__ import annotations

import pytest
from standardwebhooks import Webhook, WebhookVerificationError

from tests.webhooks.conftest import create_endpoint, make_agent, patch, post
from webhooks.models import Endpoint, EventDelivery
from webhooks.secretbox import decrypt_secret

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_delivery")]


def test_create_answers_the_secret_once_and_stores_it_encrypted(org_a, receiver):
    created = create_endpoint(org_a, receiver.url, events=["run.finished", "balance.low"], description="ops")
    assert created["secret"].startswith("whsec_") and created["id"].startswith("whe_")
    assert created["events"] == ["balance.low", "run.finished"] and created["enabled"] is True and created["description"] == "ops"
    listed = org_a.client.get("/v1/agents/webhooks").json()["webhooks"]
    assert [w["id"] for w in listed] == [created["id"]] and "secret" not in listed[0]
    assert "secret" not in org_a.client.get(f"/v1/agents/webhooks/{created['id']}").json()
    with org_a.context():
        row = Endpoint.objects.get()
    assert created["secret"] not in row.secret_encrypted and decrypt_secret(row.secret_encrypted) == created["secret"]


@pytest.mark.parametrize("body, fragment", [
    ({"url": "https://example.com/h", "events": []}, "events"),
    ({"url": "https://example.com/h", "events": ["run.started"]}, "unknown event type"),
    ({"url": "https://example.com/h"}, "events"),
    ({"events": ["run.finished"]}, "url is required"),
    ({"url": "http://example.com/h", "events": ["run.finished"]}, "url"),  # plain http to a host not allow-listed
    ({"url": "https://169.254.169.254/latest", "events": ["run.finished"]}, "url"),  # metadata address
    ({"url": "https://10.0.0.5/h", "events": ["run.finished"]}, "url"),  # private address
    ({"url": "https://example.com/h", "events": ["run.finished"], "description": "x" * 501}, "description"),
])
def test_bad_input_is_400_and_nothing_is_stored(org_a, body, fragment):
    response = post(org_a.client, "/v1/agents/webhooks", body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_request" and fragment in response.json()["error"]
    with org_a.context():
        assert Endpoint.objects.count() == 0


def test_only_org_admins_manage_endpoints_and_another_orgs_is_404(org_a, org_b, make_org, receiver):
    created = create_endpoint(org_a, receiver.url)
    member = make_org("m", admin=False)
    assert member.client.get("/v1/agents/webhooks").status_code == 403
    assert post(member.client, "/v1/agents/webhooks", {"url": receiver.url, "events": ["run.finished"]}).status_code == 403
    for method, path in [("get", ""), ("patch", ""), ("delete", ""), ("post", "/rotate"), ("post", "/test"), ("get", "/deliveries")]:
        url = f"/v1/agents/webhooks/{created['id']}{path}"
        response = getattr(org_b.client, method)(url, "{}", content_type="application/json") if method != "get" else org_b.client.get(url)
        assert response.status_code == 404, (method, path, response.content)
    with org_a.context():
        assert Endpoint.objects.get().public_id == created["id"]


def test_patch_changes_only_what_is_given_and_delete_removes_it(org_a, receiver):
    created = create_endpoint(org_a, receiver.url)
    changed = patch(org_a.client, f"/v1/agents/webhooks/{created['id']}", {"events": ["target.offline"], "enabled": False}).json()
    assert changed["events"] == ["target.offline"] and changed["enabled"] is False and changed["url"] == receiver.url
    assert patch(org_a.client, f"/v1/agents/webhooks/{created['id']}", {"url": "https://10.1.1.1/x"}).status_code == 400
    assert org_a.client.delete(f"/v1/agents/webhooks/{created['id']}").status_code == 204
    assert org_a.client.get(f"/v1/agents/webhooks/{created['id']}").status_code == 404


def test_rotation_the_old_secret_verifies_nothing_after(org_a, receiver):
    created = create_endpoint(org_a, receiver.url)
    rotated = post(org_a.client, f"/v1/agents/webhooks/{created['id']}/rotate").json()
    assert rotated["secret"].startswith("whsec_") and rotated["secret"] != created["secret"]
    receiver.secret = rotated["secret"]
    sent = post(org_a.client, f"/v1/agents/webhooks/{created['id']}/test")
    assert sent.status_code == 200 and sent.json()["status"] == "succeeded" and sent.json()["type"] == "webhook.test"
    got = receiver.received[0]
    assert got.error is None and got.verified["type"] == "webhook.test"
    with pytest.raises(WebhookVerificationError):
        Webhook(created["secret"]).verify(got.body, got.headers)


def test_test_send_and_redeliver_keep_the_webhook_id_and_log_attempts(org_a, receiver):
    created = create_endpoint(org_a, receiver.url)
    receiver.secret = created["secret"]
    receiver.mode = "body"
    receiver.answer = b'{"error": "nope", "token": "ghp_' + b"A" * 36 + b'"}' + b"x" * 8000
    sent = post(org_a.client, f"/v1/agents/webhooks/{created['id']}/test").json()
    assert sent["status"] == "retrying" and sent["attempts"] == 1 and sent["lastStatusCode"] == 500
    [attempt] = sent["attemptLog"]
    assert attempt["statusCode"] == 500 and len(attempt["responseBody"]) <= 4096
    assert "ghp_" + "A" * 36 not in attempt["responseBody"] and "redacted" in attempt["responseBody"]  # masked
    # Still being attempted: 409; once it has ended, redeliver by id under the same webhook-id.
    redeliver = f"/v1/agents/webhooks/{created['id']}/deliveries/{sent['id']}/redeliver"
    assert post(org_a.client, redeliver).status_code == 409
    with org_a.context():
        EventDelivery.objects.filter(public_id=sent["id"]).update(status="dead", next_attempt_at=None)
    receiver.mode = "ok"
    again = post(org_a.client, redeliver)
    assert again.status_code == 202, again.content
    log = org_a.client.get(f"/v1/agents/webhooks/{created['id']}/deliveries").json()["deliveries"]
    assert log[0]["id"] == sent["id"] and log[0]["status"] == "succeeded" and log[0]["attempts"] == 2
    assert [a["statusCode"] for a in log[0]["attemptLog"]] == [500, 204]
    assert receiver.received[-1].headers["webhook-id"] == sent["id"]
    assert post(org_a.client, f"/v1/agents/webhooks/{created['id']}/deliveries/msg_unknown/redeliver").status_code == 404


def test_webhooks_is_a_reserved_agent_name_and_an_existing_one_stays_reachable_by_id(org_a):
    refused = post(org_a.client, "/v1/agents", {"name": "webhooks"})
    assert refused.status_code == 400 and "reserved" in refused.json()["error"]
    from agents.models import Agent

    agent = make_agent(org_a, "old-hooks")
    with org_a.context():
        Agent.objects.filter(pk=agent["id"]).update(name="webhooks")  # named before the word was reserved
    assert org_a.client.get(f"/v1/agents/{agent['id']}").json()["name"] == "webhooks"
    assert org_a.client.get("/v1/agents/webhooks").status_code == 200  # the route, not the agent


def test_an_org_has_at_most_twenty_endpoints(org_a, receiver):
    for _ in range(20):
        create_endpoint(org_a, receiver.url)
    response = post(org_a.client, "/v1/agents/webhooks", {"url": receiver.url, "events": ["run.finished"]})
    assert response.status_code == 409 and response.json()["code"] == "conflict"
    with org_a.context():
        assert Endpoint.objects.count() == 20
