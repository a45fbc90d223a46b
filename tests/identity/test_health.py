"""health_check_url is probed on a schedule and shown as the agent's health."""

import pytest

from identity.tasks import health_probes
from tests.identity.conftest import create_agent, patch

pytestmark = pytest.mark.django_db


def test_health_probe_marks_healthy_then_unhealthy(org_a, receiver):
    created = create_agent(org_a.client, health_check_url=receiver.url.replace("/hook", "/health")).json()
    path = f"/v1/identity/agents/{created['agent_id']}"
    assert org_a.client.get(path).json()["health"]["status"] == "unknown"
    assert health_probes()["done"] >= 1
    health = org_a.client.get(path).json()["health"]
    assert health["status"] == "healthy" and health["checked_at"]
    receiver.health_status = 503
    health_probes()
    health = org_a.client.get(path).json()["health"]
    assert health["status"] == "unhealthy" and "503" in health["detail"]
    # A new URL resets the health until it is probed.
    patch(org_a.client, path, {"health_check_url": receiver.url.replace("/hook", "/other")})
    assert org_a.client.get(path).json()["health"]["status"] == "unknown"


def test_health_probe_refuses_a_private_address_that_is_not_allow_listed(org_a, receiver, settings):
    created = create_agent(org_a.client, health_check_url=receiver.url).json()
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = []
    health_probes()
    health = org_a.client.get(f"/v1/identity/agents/{created['agent_id']}").json()["health"]
    assert health["status"] == "unhealthy" and "refused" in health["detail"]


def test_health_probes_go_through_the_outbound_door(org_a, receiver, settings, monkeypatch):
    """A named host is resolved once by toolkit.outbound and the probe connects to the checked answer."""
    from toolkit import outbound

    lookups: list[str] = []
    monkeypatch.setattr(outbound, "system_resolver", lambda host, port: lookups.append(host) or ["127.0.0.1"])
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["hooks.test"]
    url = receiver.url.replace("/hook", "/health").replace("127.0.0.1", "hooks.test")
    created = create_agent(org_a.client, health_check_url=url).json()
    assert "agent_id" in created, created
    health_probes()
    health = org_a.client.get(f"/v1/identity/agents/{created['agent_id']}").json()["health"]
    assert health["status"] == "healthy" and "hooks.test" in lookups
    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = []  # no longer admitted: plain http and its loopback answer are refused
    health_probes()
    health = org_a.client.get(f"/v1/identity/agents/{created['agent_id']}").json()["health"]
    assert health["status"] == "unhealthy" and health["detail"] == "refused destination: the URL must use https"
