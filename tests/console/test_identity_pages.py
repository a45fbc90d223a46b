"""Identity console pages rendered for a signed-in user (server side)."""

import pytest

from tests.console.conftest import signed_in
from tests.identity.conftest import create_agent, pair, post

pytestmark = pytest.mark.django_db


def test_identity_pages_show_the_users_agents_deliveries_and_inbox(org_a, make_org, settings):
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    mine = create_agent(org_a.client, display_name="Mine", custom_id="mine_agent", connection_mode="webhook", webhook_url="http://127.0.0.1:9/h").json()
    other = make_org("x")
    create_agent(other.client, display_name="Theirs", custom_id="their_agent")
    client = signed_in(org_a)
    page = client.get("/console/identity/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "mine_agent" in html and "their_agent" not in html
    assert mine["agent_token"] not in html  # shown once, by the API answer only
    both = pair(org_a.client, org_a.user.get_username(), mine, webhook=True)
    assert both.send_to_agent().status_code == 202
    deliveries = client.get(f"/console/identity/{mine['agent_id']}/deliveries/")
    assert deliveries.status_code == 200 and b"data-delivery=" in deliveries.content
    assert signed_in(other).get(f"/console/identity/{mine['agent_id']}/deliveries/").status_code == 404
    post(org_a.client, f"/v1/identity/agents/{mine['agent_id']}/relations")
    assert both.send_to_user().status_code == 201
    inbox = client.get("/console/identity/inbox/")
    assert inbox.status_code == 200 and b'data-kind="envelope"' in inbox.content


def test_identity_pages_need_a_login(org_a):
    from django.test import Client

    response = Client().get("/console/identity/")
    assert response.status_code == 302 and "/console/login/" in response["Location"]
