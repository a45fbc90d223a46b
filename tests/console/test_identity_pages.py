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


# --- re-register keys from the identity page (issue 34) -------------------------------------

def _keysets(handle, agent_id: str) -> list[tuple[str, bool]]:
    from identity.models import AgentKeySet

    with handle.context():
        return [(k.public_key, k.revoked_at is None) for k in AgentKeySet.objects.filter(agent_id=agent_id).order_by("created_at", "id")]


def _rekey(client, agent_id: str, body) -> object:
    import json

    return client.post(f"/console/identity/{agent_id}/keys/register/", json.dumps(body), content_type="application/json")


def test_identity_page_offers_re_register_keys_on_each_agent(org_a):
    mine = create_agent(org_a.client, display_name="Mine", custom_id="mine_agent").json()
    html = signed_in(org_a).get("/console/identity/").content.decode()
    row = html.split(f'data-agent="{mine["agent_id"]}"')[1].split("</tr>")[0]
    assert f'data-action="rekey" data-rekey-url="/console/identity/{mine["agent_id"]}/keys/register/"' in row
    assert "data-webhook" not in row.split('data-action="rekey"')[1].split(">")[0]
    assert "console/agent_keys.js" in html and 'id="keys-box"' in html


def test_re_register_after_an_emergency_rotation_makes_the_new_keys_current(org_a):
    from tests.identity.conftest import AgentKeys, bearer

    agent_keys = AgentKeys()
    mine = create_agent(org_a.client, display_name="Mine", custom_id="mine_agent").json()
    post(org_a.client, f"/v1/identity/agents/{mine['agent_id']}/keys/register", agent_keys.body(webhook=False), **bearer(mine["agent_token"]))
    rotated = post(org_a.client, f"/v1/identity/agents/{mine['agent_id']}/token/regenerate", {"emergency": True})
    assert rotated.status_code == 200
    assert not any(current for _, current in _keysets(org_a, mine["agent_id"]))  # the emergency revoked the keys

    fresh = AgentKeys()
    response = _rekey(signed_in(org_a), mine["agent_id"], fresh.body(webhook=False))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["public_key"] == fresh.body(webhook=False)["public_key"] and body["webhook_secret_set"] is False
    assert _keysets(org_a, mine["agent_id"])[-1] == (body["public_key"], True)
    listed = org_a.client.get(f"/v1/identity/agents/{mine['agent_id']}").json()
    assert [k["public_key"] for k in listed["public_keys"]] == [body["public_key"]]


def test_re_register_of_a_webhook_agent_needs_its_new_secret_in_the_apis_words(org_a, settings):
    from tests.identity.conftest import AgentKeys

    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    hooked = create_agent(org_a.client, display_name="Hook", custom_id="hook_agent", connection_mode="webhook", webhook_url="http://127.0.0.1:9/h").json()
    html = signed_in(org_a).get("/console/identity/").content.decode()
    assert "data-webhook" in html.split(f'data-agent="{hooked["agent_id"]}"')[1].split("</tr>")[0]
    keys = AgentKeys()
    refused = _rekey(signed_in(org_a), hooked["agent_id"], keys.body(webhook=False))
    assert refused.status_code == 400
    assert refused.json()["status"] == 400 and refused.json()["code"] == "invalid_request"
    assert refused.json()["error"] == "webhook_secret is required for a webhook agent"
    assert _keysets(org_a, hooked["agent_id"]) == []
    accepted = _rekey(signed_in(org_a), hooked["agent_id"], keys.body(webhook=True))
    assert accepted.status_code == 200 and accepted.json()["webhook_secret_set"] is True


@pytest.mark.parametrize("body", [{"public_key": "AAAA", "signing_public_key": "AAAA"}, {}, ["not", "an", "object"]])
def test_re_register_refuses_keys_that_are_not_keys_and_stores_nothing(org_a, body):
    mine = create_agent(org_a.client, display_name="Mine", custom_id="mine_agent").json()
    response = _rekey(signed_in(org_a), mine["agent_id"], body)
    assert response.status_code == 400 and response.json()["code"] == "invalid_request"
    assert _keysets(org_a, mine["agent_id"]) == []


def test_re_register_is_for_the_creator_only(org_a, make_org):
    from tests.identity.conftest import AgentKeys

    mine = create_agent(org_a.client, display_name="Mine", custom_id="mine_agent").json()
    other = make_org("x")
    response = _rekey(signed_in(other), mine["agent_id"], AgentKeys().body(webhook=False))
    assert response.status_code == 404 and response.json()["code"] == "not_found"
    assert _keysets(org_a, mine["agent_id"]) == []
    assert signed_in(org_a).get(f"/console/identity/{mine['agent_id']}/keys/register/").status_code == 405
