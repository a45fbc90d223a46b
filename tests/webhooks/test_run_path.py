"""What a run's own thread pays for `run.finished` (issue 32: a slow receiver never delays a run).

The deliveries are written in the run's finish transaction — one bulk insert for every endpoint,
durable exactly when the finish is — and one django-q2 task for all of them is queued after the
commit, without a success row; no HTTP on the run's thread.
"""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from tests.webhooks.conftest import create_endpoint, fund, make_agent, post
from webhooks.models import EventDelivery

pytestmark = pytest.mark.django_db


@pytest.fixture
def queued(monkeypatch):
    """Every django-q2 task queued, as `(func, args, kwargs)`; none is run."""
    import django_q.tasks

    calls = []
    monkeypatch.setattr(django_q.tasks, "async_task", lambda func, *args, **kwargs: calls.append((func, args, kwargs)))
    return calls


@pytest.fixture
def three_endpoints(org_a, receiver, upstream):
    fund(org_a)
    make_agent(org_a, "helper")
    return [create_endpoint(org_a, f"{receiver.url}/{n}", events=["run.finished"]) for n in range(3)]


def test_a_run_with_three_endpoints_inserts_their_deliveries_once_and_queues_one_task(org_a, three_endpoints, receiver, queued):
    with org_a.context():
        from tenancy import stores

        alias = stores.current_alias()
    with CaptureQueriesContext(connections[alias]) as org_queries:
        response = post(org_a.client, "/v1/agents/helper/run", {"input": "hi"})

    assert response.status_code == 200
    inserts = [q["sql"] for q in org_queries.captured_queries if q["sql"].startswith("INSERT") and "eventdelivery" in q["sql"]]
    assert len(inserts) == 1  # one bulk insert for the three endpoints
    deliveries = [(func, args, kwargs) for func, args, kwargs in queued if func == "webhooks.tasks.deliver"]
    assert len(deliveries) == 1 and deliveries[0][2]["save"] is False  # no django-q2 success row per task
    with org_a.context():
        ids = set(EventDelivery.objects.filter(event_type="run.finished").values_list("public_id", flat=True))
    assert set(deliveries[0][1][2]) == ids and len(ids) == 3
    assert receiver.received == []  # nothing was sent on the run's thread


def test_the_deliveries_commit_with_the_finish_even_if_the_process_dies_right_after(org_a, three_endpoints, queued, monkeypatch):
    from runs import lifecycle

    monkeypatch.setattr(lifecycle, "_after_finish", lambda run, **kwargs: None)  # the process is gone once the finish commits
    response = post(org_a.client, "/v1/agents/helper/run", {"input": "hi"})

    assert response.status_code == 200
    with org_a.context():
        rows = list(EventDelivery.objects.filter(event_type="run.finished").values_list("status", "payload"))
    assert len(rows) == 3 and {status for status, _ in rows} == {"pending"}
    assert all(response.json()["id"] in payload for _, payload in rows)  # the minute tick delivers them
