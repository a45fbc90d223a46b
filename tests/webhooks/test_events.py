"""The other events (issue 32 item 1): target.offline once per change of a machine's computed
status (the sweep), session.published, balance.low once per crossing — each verified by the receiver."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from targets.models import Target
from tests.webhooks.conftest import create_endpoint, fund, make_agent, patch, post, verified_types
from webhooks.tasks import target_sweep

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("inline_delivery")]


def _subscribe(org, receiver, events):
    endpoint = create_endpoint(org, receiver.url, events=events)
    receiver.secret = endpoint["secret"]
    return endpoint


def test_target_offline_is_one_event_per_change_of_the_computed_status(org_a, receiver):
    _subscribe(org_a, receiver, ["target.offline"])
    target_id = post(org_a.client, "/v1/agents/targets", {"label": "box", "host": "box.local",
                                                          "metrics": {"load1": 0.1}}).json()["id"]
    target_sweep()  # first sight: remembered, no event
    target_sweep()
    assert receiver.received == []
    with org_a.context():  # silent for more than 90 s: computed offline
        Target.objects.filter(pk=target_id).update(metrics_at=timezone.now() - timedelta(seconds=300))
    target_sweep()
    target_sweep()  # no change since: no second event
    assert verified_types(receiver) == ["target.offline"]
    data = receiver.received[0].verified["data"]
    assert data["id"] == target_id and data["status"] == "offline" and data["previousStatus"] == "online"
    patch(org_a.client, f"/v1/agents/targets/{target_id}", {"metrics": {"load1": 0.2}})  # a heartbeat: online again
    target_sweep()
    assert verified_types(receiver) == ["target.offline", "target.offline"]
    assert receiver.received[1].verified["data"]["status"] == "online"


def test_session_published_is_delivered_once(org_a, receiver):
    _subscribe(org_a, receiver, ["session.published"])
    session = post(org_a.client, "/v1/agents/sessions", {"agent": "coder", "title": "demo", "project": "site"}).json()
    assert receiver.received == []
    assert patch(org_a.client, f"/v1/agents/sessions/{session['id']}", {"published": True}).status_code == 200
    patch(org_a.client, f"/v1/agents/sessions/{session['id']}", {"title": "still published"})
    assert verified_types(receiver) == ["session.published"]
    assert receiver.received[0].verified["data"]["id"] == session["id"]


def test_balance_low_fires_once_when_a_debit_crosses_the_threshold(org_a, receiver, upstream, settings):
    settings.AGENTS_WEBHOOK_BALANCE_LOW_CENTS = 250
    fund(org_a, 400)  # runs cost 100 cents (tests/agents fast_policy)
    make_agent(org_a, "helper")
    _subscribe(org_a, receiver, ["balance.low"])
    for _ in range(3):
        assert post(org_a.client, "/v1/agents/helper/run", {"input": "hi"}).status_code == 200
    assert verified_types(receiver) == ["balance.low"]  # 400 → 300 → 200 (crossed) → 100
    data = receiver.received[0].verified["data"]
    assert data["balanceCents"] == 200 and data["thresholdCents"] == 250 and data["runId"].startswith("run_")


@pytest.mark.parametrize("heard", [False, True], ids=["no-balance-low-endpoint", "balance-low-endpoint"])
def test_a_run_reads_the_endpoints_once_when_none_hears_balance_low(org_a, receiver, upstream, settings, heard):
    """The finish's one read of the org's endpoints (`run.finished`'s targets) also tells the
    debit's balance check whether any endpoint hears `balance.low`: with none, the run reads
    the endpoints once (it read them again on every run); with one, once more to deliver it
    (issue 26 item 4, a run's fixed cost)."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from tenancy import stores

    settings.AGENTS_WEBHOOK_BALANCE_LOW_CENTS = 250
    fund(org_a, 300)  # runs cost 100 cents (tests/agents fast_policy): this one crosses 250
    make_agent(org_a, "helper")
    _subscribe(org_a, receiver, ["balance.low"] if heard else ["session.published"])
    with org_a.context():
        alias = stores.current_alias()
    with CaptureQueriesContext(connections[alias]) as captured:
        response = post(org_a.client, "/v1/agents/helper/run", {"input": "hi"})

    assert response.status_code == 200 and response.json()["status"] == "ok"
    reads = [q["sql"] for q in captured.captured_queries if re.search(r'FROM "webhooks_endpoint".* WHERE \S*"enabled"', q["sql"])]
    assert len(reads) == (2 if heard else 1)  # heard: the finish's read and the event's own
    assert verified_types(receiver) == (["balance.low"] if heard else [])


def test_run_waiting_is_delivered_with_the_calls_the_run_waits_on(org_a, receiver, upstream):
    from tests.support.upstream import Reply

    fund(org_a, 400)
    make_agent(org_a, "careful", tools=["calculator"], approval={"tools": ["calculator"]})
    _subscribe(org_a, receiver, ["run.waiting"])
    upstream.script(Reply(tool_calls=[("calculator", {"expression": "3*3"})]))
    response = post(org_a.client, "/v1/agents/careful/run", {"input": "square"})
    assert response.status_code == 202
    assert verified_types(receiver) == ["run.waiting"]
    data = receiver.received[0].verified["data"]
    assert data["id"] == response.json()["id"] and data["status"] == "waiting"
    assert data["approvals"][0]["tool"] == "calculator" and data["approvals"][0]["arguments"] == {"expression": "3*3"}
