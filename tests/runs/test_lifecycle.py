"""runs.lifecycle's transitions between start and finish (issue 48 item 1): `run_mark_waiting` and
`run_mark_resumed`, each one conditional UPDATE that one caller wins, on SQLite and PostgreSQL.
(`run_start`/`run_finish`: tests/runs/test_run_path_writes.py and tests/agents/test_run_request.py.)"""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs import queries
from runs.lifecycle import Outcome, run_mark_resumed, run_mark_waiting
from runs.models import Run
from agents_site.vocabulary import RunKind, RunStatus
from tenancy import stores

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def _run(status: str, *, n: int, fee: int = 100) -> Run:
    now = timezone.now()
    run = Run(id=f"run_lc{n}", kind=RunKind.RUN, agent_name="writer", status=status, fee_cents=fee, model="m1", input="hi",
              actor="t/ann", created_at=now, started_at=now, attempts=1)
    queries.run_insert(run, stores.current_alias())
    return run


def test_a_running_run_is_suspended_once_with_its_usage_and_keeps_its_fee(org_a):
    with org_a.context():
        run = _run(RunStatus.RUNNING, n=1)
        usage = Outcome(status=RunStatus.WAITING, model="m2", attempts=3, prompt_tokens=11, completion_tokens=5, tool_calls=2)
        assert run_mark_waiting(run_id=run.id, outcome=usage) is True
        stored = Run.objects.get(pk=run.id)
        assert (stored.status, stored.model, stored.attempts, stored.prompt_tokens, stored.completion_tokens, stored.tool_calls) == (
            RunStatus.WAITING, "m2", 3, 11, 5, 2)
        assert queries.fees_held(stores.current_alias()) == 100  # a waiting run still holds its fee
        assert run_mark_waiting(run_id=run.id, outcome=usage) is False  # no longer running: a second suspension loses


def test_suspending_without_a_model_keeps_the_recorded_one_and_leaves_usage_alone_without_an_outcome(org_a):
    with org_a.context():
        first, second = _run(RunStatus.RUNNING, n=2), _run(RunStatus.RUNNING, n=3)
        assert run_mark_waiting(run_id=first.id, outcome=Outcome(status=RunStatus.WAITING, attempts=4))
        assert run_mark_waiting(run_id=second.id)
        assert Run.objects.filter(pk=first.id).values_list("status", "model", "attempts").get() == (RunStatus.WAITING, "m1", 4)
        assert Run.objects.filter(pk=second.id).values_list("status", "model", "attempts").get() == (RunStatus.WAITING, "m1", 1)


def test_only_a_running_run_is_suspended(org_a):
    with org_a.context():
        for n, status in enumerate([RunStatus.QUEUED, RunStatus.OK, RunStatus.ERROR, RunStatus.WAITING], start=10):
            run = _run(status, n=n)
            assert run_mark_waiting(run_id=run.id) is False
            assert Run.objects.get(pk=run.id).status == status


def test_a_waiting_run_is_resumed_once(org_a):
    with org_a.context():
        run = _run(RunStatus.WAITING, n=20)
        assert run_mark_resumed(run_id=run.id) is True
        assert Run.objects.get(pk=run.id).status == RunStatus.RUNNING
        assert run_mark_resumed(run_id=run.id) is False  # the second resume task (or claim) does nothing


def test_only_a_waiting_run_is_resumed(org_a):
    with org_a.context():
        for n, status in enumerate([RunStatus.QUEUED, RunStatus.RUNNING, RunStatus.OK, RunStatus.ERROR], start=30):
            run = _run(status, n=n)
            assert run_mark_resumed(run_id=run.id) is False
            assert Run.objects.get(pk=run.id).status == status


def test_a_transition_rolls_back_with_the_callers_transaction(org_a):
    with org_a.context():
        run = _run(RunStatus.RUNNING, n=40)
        with pytest.raises(RuntimeError):
            with stores.org_atomic():
                assert run_mark_waiting(run_id=run.id)
                raise RuntimeError("the caller's own write failed")
        assert Run.objects.get(pk=run.id).status == RunStatus.RUNNING
