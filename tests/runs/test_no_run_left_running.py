"""No run is ever left `running` (issue 51 item 2).

* A run whose finish fails to commit is recorded `error` by the same request (it stayed
  `running`, holding its fee, when the webhook-endpoint delete race refused the finish's commit).
* The recovery sweep, called with an injected clock, ends a synchronous run whose executing
  process is gone at once, and any synchronous run past `SYNC_RUN_MAX`, and leaves a live one.
* A run `GET /v1/agents/runs?status=running` lists is listed by its agent's runs with the same
  filter (`GET /v1/agents/{ref}/runs?status=running`), and in its history once it has finished.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from datetime import timedelta

import pytest
from django.db import connections
from django.test import Client
from django.utils import timezone

from runs import hooks
from runs.lifecycle import FINISH_FAILED
from runs.models import Run
from runs.recovery import SYNC_RUN_MAX, WORKER_LOST, recover_org
from sessions.models import Session
from tests.agents.conftest import debits, fund, make_agent
from tests.support.upstream import Reply
from tests.support.waiting import wait_until
from webhooks.models import RunCallback

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def _client(org) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {org.key}", raise_request_exception=False)


def _running_ids(org, path: str = "/v1/agents/runs?status=running") -> list[str]:
    response = _client(org).get(path)
    assert response.status_code == 200, response.content
    return [run["id"] for run in response.json()["runs"]]


def test_a_run_whose_finish_cannot_commit_is_recorded_error_by_its_own_request(org_a, upstream, monkeypatch):
    fund(org_a)
    make_agent(org_a, "helper")

    def dangling(run):
        # A row the finish's commit refuses (its foreign key names no endpoint): what the
        # endpoint-delete race left behind, and any commit a store refuses, looks like this.
        RunCallback.objects.create(run_id=run.id, endpoint_id=10**9, url="https://example.com/x", created_at=timezone.now())

    class Dangling(hooks.RunObserver):
        def finishing(self, run):
            dangling(run)

    monkeypatch.setattr(hooks, "_observers", [*hooks._observers, Dangling()])
    response = _client(org_a).post("/v1/agents/helper/run", json.dumps({"input": "hi"}), content_type="application/json")
    assert response.status_code == 500, response.content
    assert response.json()["code"] == "internal_error"
    with org_a.context():
        run = Run.objects.get()
        assert (run.status, run.finish_reason) == ("error", "error")
        assert run.error.startswith(FINISH_FAILED) and run.finished_at is not None
        assert Session.objects.get(pk=run.session_id).status == "error"
        assert not RunCallback.objects.exists()
    assert debits(org_a) == []  # an error run is never billed
    assert _running_ids(org_a) == []


class SyncRun(threading.Thread):
    """POST /v1/agents/helper/run in a thread (the upstream holds its answer)."""

    def __init__(self, org) -> None:
        super().__init__(daemon=True)
        self.org, self.status = org, None

    def run(self) -> None:
        try:
            response = _client(self.org).post("/v1/agents/helper/run", json.dumps({"input": "hi"}), content_type="application/json")
            self.status = response.status_code
        finally:
            connections.close_all()


@pytest.fixture
def two_running(org_a, upstream):
    """Two synchronous runs of `helper` in flight (their model answers held); released afterwards."""
    fund(org_a)
    make_agent(org_a, "helper")
    released = threading.Event()
    upstream.script(Reply(hold=released, content="late"), Reply(hold=released, content="late"))
    threads = [SyncRun(org_a), SyncRun(org_a)]
    for thread in threads:
        thread.start()
    try:
        ids = wait_until(lambda: (found := _running_ids(org_a)) and len(found) == 2 and found, timeout=60, what="two runs running")
        yield ids, threads, released
    finally:
        released.set()
        for thread in threads:
            thread.join(60)


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_the_sweep_ends_a_sync_run_whose_process_is_gone_and_leaves_a_live_one(org_a, two_running):
    (lost_id, live_id), _, _ = two_running
    with org_a.context():
        session_id = Run.objects.get(pk=lost_id).session_id
        recorded = Session.objects.get(pk=session_id).executor_channel
        assert recorded.startswith(f"{socket.gethostname()}:")  # the executing process, on either bus
        # The process that executes it is killed: its host:pid no longer exists.
        Session.objects.filter(pk=session_id).update(executor_channel=f"{socket.gethostname()}:{_dead_pid()}|{recorded.split('|', 1)[1]}")
        report = recover_org(org=org_a.slug, now=timezone.now())
        assert report.lost == [lost_id]
        lost = Run.objects.get(pk=lost_id)
        assert (lost.status, lost.error) == ("error", WORKER_LOST)
        assert Session.objects.get(pk=session_id).status == "error"
        assert Run.objects.get(pk=live_id).status == "running"  # its process is alive and it is young
        assert recover_org(org=org_a.slug, now=timezone.now() + SYNC_RUN_MAX - timedelta(minutes=1)).lost == []
        report = recover_org(org=org_a.slug, now=timezone.now() + SYNC_RUN_MAX + timedelta(seconds=1))
        assert report.lost == [live_id]
    assert _running_ids(org_a) == []


def test_a_running_run_is_listed_by_its_agents_runs_too(org_a, two_running):
    ids, threads, released = two_running
    assert sorted(_running_ids(org_a, "/v1/agents/helper/runs?status=running")) == sorted(ids)
    assert _running_ids(org_a, "/v1/agents/helper/runs") == []  # the history: finished runs only
    released.set()
    for thread in threads:
        thread.join(60)
    assert [thread.status for thread in threads] == [200, 200]
    assert sorted(_running_ids(org_a, "/v1/agents/helper/runs")) == sorted(ids)
    assert _running_ids(org_a, "/v1/agents/helper/runs?status=running") == []


def test_the_sweep_debits_an_ok_run_whose_debit_was_lost_with_its_process(org_a, upstream):
    from django.db.models import F, Sum

    from billing.models import Account, LedgerEntry
    from runs.recovery import CHARGE_GRACE

    fund(org_a, 1000)
    make_agent(org_a, "helper")
    response = _client(org_a).post("/v1/agents/helper/run", json.dumps({"input": "hi"}), content_type="application/json")
    assert response.status_code == 200, response.content
    run_id = response.json()["id"]
    [debit] = debits(org_a)
    # As a process killed between the finish's commit and its debit leaves it (the soak found one).
    debit.delete()
    Account.objects.filter(org=org_a.org).update(balance_cents=F("balance_cents") - debit.amount_cents)
    with org_a.context():
        finished = Run.objects.get(pk=run_id).finished_at
        assert recover_org(org=org_a.slug, now=finished + CHARGE_GRACE - timedelta(seconds=1)).charged == []  # its process may still debit it
        assert recover_org(org=org_a.slug, now=finished + CHARGE_GRACE + timedelta(seconds=1)).charged == [run_id]
        assert recover_org(org=org_a.slug, now=finished + CHARGE_GRACE + timedelta(seconds=2)).charged == []  # once
    [again] = debits(org_a)
    assert (again.run_id, again.amount_cents) == (run_id, debit.amount_cents)
    balance = Account.objects.get(org=org_a.org).balance_cents
    assert balance == 1000 + debit.amount_cents == LedgerEntry.objects.filter(org=org_a.org).aggregate(s=Sum("amount_cents"))["s"]
