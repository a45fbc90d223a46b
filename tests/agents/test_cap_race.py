"""The long-running cap holds under simultaneous creates, on SQLite and on the real PostgreSQL.

Count-then-insert under PostgreSQL's READ COMMITTED let several transactions count the same
free slot; `stores.org_atomic(serialize=...)` makes them take turns (an advisory lock there;
BEGIN IMMEDIATE on SQLite).
"""

import json
import threading

import pytest
from django.db import connections
from django.test import Client

from agents.models import Agent
from agents_site.vocabulary import ExecutionMode

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = 8


def _race(org, settings, body_for) -> list[int]:
    settings.CLOUD_AGENT_MAX_LONG_RUNNING = 2
    barrier = threading.Barrier(THREADS)
    statuses: list[int] = []

    def create(i: int) -> None:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {org.key}")
        try:
            barrier.wait()
            response = client.post("/v1/agents", json.dumps(body_for(i)), content_type="application/json")
            statuses.append(response.status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=create, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return sorted(statuses)


def _long_running(i: int) -> dict:
    return {"name": f"lr-{i}", "executionMode": "long-running", "schedule": "*/5 * * * *"}


def _assert_cap_held(org, statuses: list[int]) -> None:
    assert statuses == [201, 201] + [409] * (THREADS - 2)
    with org.context():
        assert Agent.objects.filter(execution_mode=ExecutionMode.LONG_RUNNING).count() == 2


def test_simultaneous_long_running_creates_respect_the_cap_on_sqlite(org_a, settings):
    _assert_cap_held(org_a, _race(org_a, settings, _long_running))


def test_simultaneous_long_running_creates_respect_the_cap_on_postgres(postgres_orgs, make_org, settings):
    org = make_org("pgcap")
    postgres_orgs.append(org.slug)
    _assert_cap_held(org, _race(org, settings, _long_running))


def test_simultaneous_switches_to_long_running_respect_the_cap_on_postgres(postgres_orgs, make_org, settings):
    org = make_org("pgcap")
    postgres_orgs.append(org.slug)
    for i in range(THREADS):
        created = org.client.post("/v1/agents", json.dumps({"name": f"lr-{i}"}), content_type="application/json")
        assert created.status_code == 201
    statuses: list[int] = []
    barrier = threading.Barrier(THREADS)
    settings.CLOUD_AGENT_MAX_LONG_RUNNING = 2

    def switch(i: int) -> None:
        client = Client(HTTP_AUTHORIZATION=f"Bearer {org.key}")
        try:
            barrier.wait()
            body = {"executionMode": "long-running", "schedule": "*/5 * * * *"}
            response = client.patch(f"/v1/agents/lr-{i}", json.dumps(body), content_type="application/json")
            statuses.append(response.status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=switch, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(statuses) == [200, 200] + [409] * (THREADS - 2)
    with org.context():
        assert Agent.objects.filter(execution_mode=ExecutionMode.LONG_RUNNING).count() == 2
