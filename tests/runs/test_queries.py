"""runs.queries (issue 27 item 3): the fees held, the run's insert and its outcome, each on
SQLite and PostgreSQL, reading back what the ORM would (the agent lookup: tests/agents/test_queries.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs import queries
from runs.models import Run
from agents_site.vocabulary import RunKind, RunStatus
from tenancy import stores

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def _run(status: str, *, fee: int = 0, started=None) -> Run:
    now = timezone.now()
    run = Run(id=f"run_q{now.timestamp():.6f}".replace(".", ""), kind=RunKind.RUN, agent_name="writer", status=status,
              fee_cents=fee, model="m", input="hi", actor="t/ann", created_at=now, started_at=started)
    queries.run_insert(run, stores.current_alias())
    return run


def test_fees_held_sums_only_the_runs_that_hold_a_fee(org_a):
    with org_a.context():
        assert queries.fees_held(stores.current_alias()) == 0
        _run(RunStatus.QUEUED, fee=100)
        _run(RunStatus.RUNNING, fee=40)
        _run(RunStatus.WAITING, fee=2)
        _run(RunStatus.OK, fee=1000)
        _run(RunStatus.ERROR, fee=1000)
        assert queries.fees_held(stores.current_alias()) == 142


def test_run_insert_stores_the_row_once(org_a):
    with org_a.context():
        run = _run(RunStatus.RUNNING, started=timezone.now())
        stored = Run.objects.get(pk=run.id)
        assert (stored.status, stored.input, stored.actor) == (RunStatus.RUNNING, "hi", "t/ann")


def test_run_outcome_writes_once_from_the_given_statuses_and_works_out_the_duration(org_a):
    with org_a.context():
        started = timezone.now() - timedelta(seconds=2)
        run = _run(RunStatus.RUNNING, started=started)
        finished_at = started + timedelta(milliseconds=1500)
        changes = {"status": RunStatus.OK, "output": "done", "finished_at": finished_at, "duration_ms": None, "model": ""}
        row = queries.run_outcome(run.id, changes, from_statuses=RunStatus.HOLDS_FEE, alias=stores.current_alias())
        assert (row.status, row.output, row.model) == (RunStatus.OK, "done", "m")  # "" kept the recorded model
        assert 1499 <= row.duration_ms <= 1500
        assert row == Run.objects.get(pk=run.id) and row.finished_at == Run.objects.get(pk=run.id).finished_at
        again = {"status": RunStatus.ERROR, "error": "late", "finished_at": finished_at, "duration_ms": 1, "model": "x"}
        assert queries.run_outcome(run.id, again, from_statuses=RunStatus.HOLDS_FEE, alias=stores.current_alias()) is None
        assert Run.objects.get(pk=run.id).status == RunStatus.OK


def test_run_outcome_of_a_run_that_never_started_takes_zero_milliseconds(org_a):
    with org_a.context():
        run = _run(RunStatus.QUEUED)
        changes = {"status": RunStatus.ERROR, "error": "stopped", "finished_at": timezone.now(), "duration_ms": None, "model": ""}
        row = queries.run_outcome(run.id, changes, from_statuses=RunStatus.HOLDS_FEE, alias=stores.current_alias())
        assert (row.status, row.duration_ms) == (RunStatus.ERROR, 0)


def test_run_move_moves_a_run_once_from_the_given_statuses(org_a):
    with org_a.context():
        run = _run(RunStatus.QUEUED)
        now = timezone.now()
        alias = stores.current_alias()
        assert queries.run_move(run.id, to=RunStatus.RUNNING, from_statuses=frozenset({RunStatus.QUEUED}), alias=alias,
                                changes={"started_at": now})
        stored = Run.objects.get(pk=run.id)
        assert (stored.status, stored.started_at) == (RunStatus.RUNNING, now)
        # A second mover finds it no longer queued: nothing changes.
        assert not queries.run_move(run.id, to=RunStatus.RUNNING, from_statuses=frozenset({RunStatus.QUEUED}), alias=alias,
                                    changes={"started_at": now + timedelta(seconds=5)})
        assert Run.objects.get(pk=run.id).started_at == now
        assert queries.run_move(run.id, to=RunStatus.WAITING, from_statuses=frozenset({RunStatus.RUNNING}), alias=alias,
                                changes={"attempts": 2, "prompt_tokens": 7, "model": "m2"})
        stored = Run.objects.get(pk=run.id)
        assert (stored.status, stored.attempts, stored.prompt_tokens, stored.model) == (RunStatus.WAITING, 2, 7, "m2")
        assert not queries.run_move("run_missing", to=RunStatus.RUNNING, from_statuses=frozenset({RunStatus.WAITING}), alias=alias)
