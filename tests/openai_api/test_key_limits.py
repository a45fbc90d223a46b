"""API keys limited to the OpenAI-compatible endpoint and to named agents, used by the SDK on daphne."""

from __future__ import annotations

import httpx
import openai
import pytest

from tenancy.services import api_key_create
from tests.openai_api.conftest import make_agent, sdk, stored_runs
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

HI = [{"role": "user", "content": "hi"}]


def limited_key(org, *agents: str) -> str:
    _, key = api_key_create(org=org.org, user=org.user, name="third-party tool", scope="openai", allowed_agents=list(agents))
    return key


def test_a_key_limited_to_named_agents_sees_and_runs_only_them(org, live, upstream):
    make_agent(org, "analyst")
    make_agent(org, "private")
    analyst_id = org.client.get("/v1/agents/analyst").json()["id"]
    client = sdk(live, limited_key(org, "writer", analyst_id))  # by name or by id

    assert [m.id for m in client.models.list().data] == ["analyst", "writer"]
    with pytest.raises(openai.NotFoundError) as hidden:
        client.models.retrieve("private")
    assert hidden.value.body["code"] == "model_not_found"
    with pytest.raises(openai.NotFoundError) as refused:
        client.chat.completions.create(model="private", messages=HI)
    assert refused.value.body["code"] == "model_not_found"
    assert stored_runs(org) == [] and upstream.chat_requests == []

    upstream.script(Reply(content="allowed"))
    assert client.chat.completions.create(model="analyst", messages=HI).choices[0].message.content == "allowed"
    assert [(r.agent_name, r.kind) for r in stored_runs(org)] == [("analyst", "openai")]


def test_a_key_limited_to_the_endpoint_without_agents_sees_every_agent(org, live, upstream):
    make_agent(org, "analyst")
    assert [m.id for m in sdk(live, limited_key(org)).models.list().data] == ["analyst", "writer"]


def test_a_limited_key_is_refused_on_every_other_api_path_in_the_one_error_shape(org, live):
    headers = {"Authorization": f"Bearer {limited_key(org)}"}
    for method, path in (("GET", "/v1/agents"), ("POST", "/v1/agents/writer/run"), ("GET", "/v1/agents/sessions"),
                         ("GET", "/v1/identity/agents")):
        response = httpx.request(method, live.url + path, headers=headers, json={"input": "hi"}, timeout=30)
        assert response.status_code == 403, (path, response.text)
        assert response.json()["code"] == "forbidden" and response.json()["status"] == 403
    assert stored_runs(org) == []
