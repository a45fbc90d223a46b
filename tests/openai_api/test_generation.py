"""A call's generation settings reach the gateway (in process: Django's client, the loopback upstream)."""

import pytest

from billing.services import credit_add

pytestmark = pytest.mark.django_db(transaction=True)


def test_max_tokens_temperature_and_top_p_reach_the_gateway(org_a, upstream):
    credit_add(org=org_a.org, cents=1000, actor="test")
    assert org_a.client.post("/v1/agents", {"name": "writer"}, content_type="application/json").status_code == 201

    response = org_a.client.post("/v1/agents/openai/v1/chat/completions", {
        "model": "writer", "messages": [{"role": "user", "content": "hi"}],
        "max_completion_tokens": 42, "temperature": 0.3, "top_p": 0.8,
    }, content_type="application/json")

    assert response.status_code == 200
    sent = upstream.chat_requests[-1]
    assert (sent.get("max_tokens") or sent.get("max_completion_tokens"), sent.get("temperature"), sent.get("top_p")) == (42, 0.3, 0.8)
