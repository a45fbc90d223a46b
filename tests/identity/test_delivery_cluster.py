"""Webhook delivery through a real django-q2 cluster process (the task engine, not inline)."""

import time

import pytest

from tests.identity.conftest import AgentKeys, bearer, create_agent, envelope, post

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_real_qcluster_delivers_the_signed_webhook(org_a, receiver):
    from tests.support.qcluster import QCluster

    keys = AgentKeys()
    created = create_agent(org_a.client, connection_mode="webhook", webhook_url=receiver.url).json()
    post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/keys/register", keys.body(webhook=True), **bearer(created["agent_token"]))
    receiver.secret = keys.webhook_secret
    sealed = envelope()
    accepted = post(org_a.client, f"/v1/identity/agents/{created['agent_id']}/messages", {"envelope": sealed})
    assert accepted.status_code == 202
    assert receiver.received == []  # queued on the task engine, not sent by the request
    cluster = QCluster({"AGENTS_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}).start()
    try:
        deadline = time.monotonic() + 60
        while not receiver.received and time.monotonic() < deadline:
            time.sleep(0.1)  # polling a condition with a deadline, not a fixed wait
        assert receiver.received, cluster.log()[-2000:]
        got = receiver.received[0]
        assert got.error is None and got.verified["data"]["envelope"] == sealed
    finally:
        cluster.stop()
