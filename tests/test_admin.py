"""The Django admin: org admins see their org's agents from its own store; members cannot log in."""

import json

from django.test import Client

from tenancy.services import membership_set


def _login(client, username):
    return client.post("/admin/login/?next=/admin/", {"username": username, "password": "pw"})


def test_org_admin_logs_in_and_sees_only_their_orgs_agents(org_a, org_b):
    org_a.client.post("/v1/agents", json.dumps({"name": "agent-of-a"}), content_type="application/json")
    org_b.client.post("/v1/agents", json.dumps({"name": "agent-of-b"}), content_type="application/json")
    client = Client()
    response = _login(client, org_a.user.username)
    assert response.status_code == 302
    page = client.get("/admin/agents/agent/")
    assert page.status_code == 200
    assert b"agent-of-a" in page.content and b"agent-of-b" not in page.content


def test_plain_member_cannot_log_in_to_the_admin(org_a):
    member = membership_set(org=org_a.org, username="plain", password="pw", is_admin=False)
    client = Client()
    response = _login(client, member.user.username)
    assert response.status_code == 200  # the login form again, with an error
    assert client.get("/admin/agents/agent/").status_code == 302
    client.force_login(member.user)
    assert client.get("/admin/agents/agent/").status_code in (302, 403)


def test_org_admin_cannot_add_or_change_agents_through_the_admin(org_a):
    # The change form wrote around agents.services (an invalid name, a cron that breaks the
    # list) and the add form was a 500; agents change through the API only.
    from agents.models import Agent

    org_a.client.post("/v1/agents", json.dumps({"name": "kept"}), content_type="application/json")
    with org_a.context():
        agent = Agent.objects.get(name="kept")
    client = Client()
    client.force_login(org_a.user)
    assert client.get("/admin/agents/agent/").status_code == 200
    assert client.get("/admin/agents/agent/add/").status_code == 403
    form = {"name": "bad name!", "model": "m", "tools": "[]", "status": "ready", "execution_mode": "long-running", "schedule": "garbage", "timezone": "UTC"}
    assert client.post("/admin/agents/agent/add/", form).status_code == 403
    client.post(f"/admin/agents/agent/{agent.id}/change/", form)
    with org_a.context():
        assert list(Agent.objects.values_list("name", "execution_mode", "schedule")) == [("kept", "one-shot", "")]
    assert org_a.client.get("/v1/agents").status_code == 200


def test_org_admin_sees_only_their_orgs_api_keys_by_hash(org_a, org_b):
    client = Client()
    _login(client, org_a.user.username)
    page = client.get("/admin/tenancy/apikey/")
    assert page.status_code == 200
    from tenancy.models import ApiKey

    key_a = ApiKey.objects.get(org=org_a.org)
    key_b = ApiKey.objects.get(org=org_b.org)
    assert key_a.prefix.encode() in page.content and key_b.prefix.encode() not in page.content
    assert org_a.key.encode() not in page.content
    detail = client.get(f"/admin/tenancy/apikey/{key_a.pk}/change/")
    assert detail.status_code == 200 and key_a.key_hash.encode() in detail.content and org_a.key.encode() not in detail.content
    assert client.get(f"/admin/tenancy/apikey/{key_b.pk}/change/").status_code == 302
    assert client.get("/admin/tenancy/apikey/add/").status_code == 403
