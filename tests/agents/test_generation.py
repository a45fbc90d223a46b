"""Generation settings on an agent (`maxTokens`, `temperature`, `topP`) and the deployment's
output cap `AGENTS_MAX_OUTPUT_TOKENS`: validated, stored, shown, and sent to the gateway."""

from __future__ import annotations

import json

import pytest

from agents.models import Agent
from tests.agents.conftest import make_agent, run

pytestmark = pytest.mark.django_db


def _sent(upstream) -> dict:
    body = upstream.chat_requests[-1]
    return {k: body.get(k) for k in ("max_tokens", "temperature", "top_p")}


def test_an_agents_settings_are_stored_shown_and_sent_to_the_gateway(funded, upstream):
    created = make_agent(funded, "tuned", maxTokens=256, temperature=0.2, topP=0.9)
    assert (created["maxTokens"], created["temperature"], created["topP"]) == (256, 0.2, 0.9)
    read = funded.client.get("/v1/agents/tuned").json()
    assert (read["maxTokens"], read["temperature"], read["topP"]) == (256, 0.2, 0.9)
    assert run(funded, "tuned").status_code == 200
    assert _sent(upstream) == {"max_tokens": 256, "temperature": 0.2, "top_p": 0.9}


def test_without_settings_every_completion_still_asks_for_at_most_the_cap(funded, upstream, settings):
    view = make_agent(funded, "plain")
    assert not {"maxTokens", "temperature", "topP"} & set(view)
    assert run(funded, "plain").status_code == 200
    assert _sent(upstream) == {"max_tokens": 1024, "temperature": None, "top_p": None}  # AGENTS_DEFAULT_OUTPUT_TOKENS
    assert "temperature" not in upstream.chat_requests[-1] and "top_p" not in upstream.chat_requests[-1]
    settings.AGENTS_MAX_OUTPUT_TOKENS = 64
    assert run(funded, "plain").status_code == 200
    assert _sent(upstream)["max_tokens"] == 64


def test_a_cap_lowered_after_the_agent_was_saved_still_bounds_its_runs(funded, upstream, settings):
    make_agent(funded, "greedy", maxTokens=4000)
    settings.AGENTS_MAX_OUTPUT_TOKENS = 100
    assert run(funded, "greedy").status_code == 200
    assert _sent(upstream)["max_tokens"] == 100


def test_every_step_of_a_tool_round_sends_the_settings(funded, upstream):
    from tests.support.upstream import Reply

    make_agent(funded, "calc", tools=["calculator"], temperature=0, maxTokens=32)
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "1+1"})]), Reply(content="2"))
    assert run(funded, "calc").status_code == 200
    assert [(r["max_tokens"], r["temperature"]) for r in upstream.chat_requests] == [(32, 0), (32, 0)]


@pytest.mark.parametrize(
    "field, value",
    [
        ("maxTokens", 0), ("maxTokens", 4097), ("maxTokens", -1), ("maxTokens", 1.5), ("maxTokens", "10"), ("maxTokens", True),
        ("temperature", -0.1), ("temperature", 2.01), ("temperature", "1"), ("temperature", True), ("temperature", [1]),
        ("topP", 0), ("topP", 1.5), ("topP", -0.5), ("topP", "0.5"), ("topP", False),
    ],
)
def test_a_bad_setting_is_400_and_nothing_is_stored(funded, field, value):
    response = funded.client.post("/v1/agents", json.dumps({"name": "bad", field: value}), content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()["status"] == 400
    make_agent(funded, "good", temperature=1)
    patched = funded.client.patch("/v1/agents/good", json.dumps({field: value}), content_type="application/json")
    assert patched.status_code == 400, patched.content
    with funded.context():
        assert list(Agent.objects.values_list("name", "temperature", "top_p", "max_tokens")) == [("good", 1.0, None, None)]


def test_the_limits_themselves_are_accepted(funded, upstream):
    view = make_agent(funded, "edges", maxTokens=4096, temperature=2, topP=1)
    assert (view["maxTokens"], view["temperature"], view["topP"]) == (4096, 2, 1)
    view = funded.client.patch("/v1/agents/edges", {"maxTokens": 1, "temperature": 0, "topP": 0.001}, content_type="application/json").json()
    assert (view["maxTokens"], view["temperature"], view["topP"]) == (1, 0, 0.001)


def test_patch_changes_a_setting_and_null_or_omitted_keeps_it(funded, upstream):
    make_agent(funded, "kept", maxTokens=100, temperature=0.5, topP=0.5)
    view = funded.client.patch("/v1/agents/kept", {"temperature": 1.5}, content_type="application/json").json()
    assert (view["maxTokens"], view["temperature"], view["topP"]) == (100, 1.5, 0.5)
    view = funded.client.patch("/v1/agents/kept", json.dumps({"maxTokens": None, "topP": None, "description": "d"}),
                               content_type="application/json").json()
    assert (view["maxTokens"], view["temperature"], view["topP"]) == (100, 1.5, 0.5)


def test_a_bad_setting_for_another_orgs_agent_is_404(funded, org_b):
    make_agent(funded, "mine")
    response = org_b.client.patch("/v1/agents/mine", {"temperature": 9}, content_type="application/json")
    assert response.status_code == 404
