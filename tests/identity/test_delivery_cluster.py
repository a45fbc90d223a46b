"""Webhook delivery through a real django-q2 cluster process (the task engine, not inline)."""

import time

import pytest

from tests.identity.conftest import create_agent, pair

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_real_qcluster_delivers_the_signed_webhook(org_a, receiver):
    from tests.support.qcluster import QCluster

    created = create_agent(org_a.client, connection_mode="webhook", webhook_url=receiver.url).json()
    both = pair(org_a.client, org_a.user.get_username(), created, webhook=True)
    receiver.secret = both.agent_keys.webhook_secret
    sealed = both.to_agent()
    accepted = both.send_to_agent(envelope=sealed)
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
