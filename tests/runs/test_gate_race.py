"""The balance gate and the insert of the running row are one transaction (no overdraft)."""

import json
import threading

import pytest
from django.db import connections
from django.test import Client

from tests.agents.conftest import debits, fund, make_agent, stored_runs
from tests.support.upstream import Reply
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def test_simultaneous_runs_cannot_share_the_last_fee(org_a, upstream):
    fund(org_a, 100)  # exactly one fee
    make_agent(org_a, "racer")
    released = threading.Event()
    upstream.script(*[Reply(hold=released, content="done") for _ in range(6)])
    barrier = threading.Barrier(6)
    statuses: list[int] = []

    def run() -> None:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {org_a.key}")
        barrier.wait()
        response = client.post("/v1/agents/racer/run", json.dumps({"input": "go"}), content_type="application/json")
        statuses.append(response.status_code)
        connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(6)]
    for t in threads:
        t.start()
    # Every request reaches the gate (five answered 402) before the admitted one's model answers.
    try:
        wait_until(lambda: len(statuses) >= 5, timeout=60, what="five requests refused at the gate")
    finally:
        released.set()
    for t in threads:
        t.join(30)
    assert sorted(statuses) == [200, 402, 402, 402, 402, 402]
    assert len(debits(org_a)) == 1
    with org_a.context():
        assert [r.status for r in stored_runs(org_a)] == ["ok"]


def test_simultaneous_background_submissions_cannot_share_the_last_fee(org_a, upstream):
    fund(org_a, 100)  # exactly one fee; queued runs hold their fee
    make_agent(org_a, "queuer")
    barrier = threading.Barrier(6)
    statuses: list[int] = []

    def submit() -> None:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {org_a.key}")
        barrier.wait()
        response = client.post("/v1/agents/queuer/run", json.dumps({"input": "go", "background": True}), content_type="application/json")
        statuses.append(response.status_code)
        connections.close_all()

    threads = [threading.Thread(target=submit) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(statuses) == [202, 402, 402, 402, 402, 402]
    with org_a.context():
        assert [r.status for r in stored_runs(org_a)] == ["queued"]
