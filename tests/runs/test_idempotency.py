"""Idempotency-Key on POST …/run: one execution and one debit per key and body, 24 h."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.idempotency import IdempotencyInProgress
from runs.models import IdempotencyRecord, Run
from agents_site.vocabulary import RunStatus
from tests.agents.conftest import debits, make_agent, run, stored_runs
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def test_same_key_and_body_answers_the_original_run_once_executed_and_billed(funded, upstream):
    make_agent(funded, "once")
    first = run(funded, "once", "pay me", **{"Idempotency-Key": "k-1"})
    second = run(funded, "once", "pay me", **{"Idempotency-Key": "k-1"})

    assert first.status_code == second.status_code == 200
    assert second.json() == first.json()
    assert "Idempotent-Replayed" not in first and second["Idempotent-Replayed"] == "true"
    assert len(upstream.chat_requests) == 1
    assert len(stored_runs(funded)) == 1 and len(debits(funded)) == 1


def test_replay_by_id_and_by_name_is_the_same_request(funded, upstream):
    agent = make_agent(funded, "either")
    first = run(funded, agent["id"], "x", **{"Idempotency-Key": "k"})
    second = run(funded, "either", "x", **{"Idempotency-Key": "k"})
    assert second.json()["id"] == first.json()["id"] and len(upstream.chat_requests) == 1


def test_replay_of_a_failed_run_is_the_same_502(funded, upstream):
    make_agent(funded, "flaky")
    upstream.script(Reply(status=400))
    first = run(funded, "flaky", "x", **{"Idempotency-Key": "k-err"})
    second = run(funded, "flaky", "x", **{"Idempotency-Key": "k-err"})
    assert first.status_code == second.status_code == 502
    assert second.json()["id"] == first.json()["id"] and len(upstream.chat_requests) == 1


def test_same_key_different_body_is_409_and_nothing_runs(funded, upstream):
    make_agent(funded, "strict")
    run(funded, "strict", "first body", **{"Idempotency-Key": "k-2"})

    response = run(funded, "strict", "second body", **{"Idempotency-Key": "k-2"})

    assert response.status_code == 409
    assert response.json() == {
        "status": 409,
        "code": "idempotency_mismatch",
        "error": "this Idempotency-Key was already used with a different request",
    }
    assert len(upstream.chat_requests) == 1 and len(stored_runs(funded)) == 1 and len(debits(funded)) == 1


def test_same_key_on_another_agent_is_a_different_request(funded, upstream):
    make_agent(funded, "one")
    make_agent(funded, "two")
    run(funded, "one", "x", **{"Idempotency-Key": "shared"})
    assert run(funded, "two", "x", **{"Idempotency-Key": "shared"}).status_code == 409


def test_key_of_another_org_is_independent(funded, org_b, upstream):
    from tests.agents.conftest import fund

    fund(org_b)
    make_agent(funded, "a")
    make_agent(org_b, "a")
    first = run(funded, "a", "x", **{"Idempotency-Key": "k"})
    other = run(org_b, "a", "x", **{"Idempotency-Key": "k"})
    assert other.status_code == 200 and other.json()["id"] != first.json()["id"]


def test_key_older_than_24_hours_runs_again(funded, upstream):
    make_agent(funded, "later")
    first = run(funded, "later", "x", **{"Idempotency-Key": "k-old"}).json()
    with funded.context():
        IdempotencyRecord.objects.filter(key="k-old").update(created_at=timezone.now() - timedelta(hours=24, seconds=1))

    second = run(funded, "later", "x", **{"Idempotency-Key": "k-old"})

    assert second.status_code == 200 and second.json()["id"] != first["id"]
    assert len(upstream.chat_requests) == 2 and len(debits(funded)) == 2
    with funded.context():
        assert list(IdempotencyRecord.objects.values_list("run_id", flat=True)) == [second.json()["id"]]


def test_key_whose_run_is_still_running_is_409(funded, upstream):
    agent = make_agent(funded, "slow")
    with funded.context():
        Run.objects.create(id="run_busy", agent_id=agent["id"], agent_name="slow", status=RunStatus.RUNNING, created_at=timezone.now())
        IdempotencyRecord.objects.create(key="k-busy", request_hash=_hash(agent["id"], "x"), run_id="run_busy", created_at=timezone.now())

    response = run(funded, "slow", "x", **{"Idempotency-Key": "k-busy"})

    assert response.status_code == 409 and response.json()["code"] == "idempotency_in_progress"
    assert upstream.chat_requests == []


def test_overlong_key_is_400(funded, upstream):
    make_agent(funded, "k")
    response = run(funded, "k", "x", **{"Idempotency-Key": "k" * 256})
    assert response.status_code == 400 and response.json()["error"] == "Idempotency-Key is at most 255 characters"
    assert stored_runs(funded) == []


def test_without_a_key_every_request_runs(funded, upstream):
    make_agent(funded, "plain")
    run(funded, "plain", "x")
    run(funded, "plain", "x")
    assert len(stored_runs(funded)) == 2 and len(debits(funded)) == 2


def test_reserve_race_answers_the_winner(funded, upstream):
    """Two requests that both missed the replay: the loser gets the winner's answer, not a second run."""
    from runs.idempotency import request_hash, reserve

    agent = make_agent(funded, "race")
    winner = run(funded, "race", "x", **{"Idempotency-Key": "k-race"}).json()
    with funded.context():
        digest = request_hash(agent_id=agent["id"], input="x")
        assert reserve(key="k-race", digest=digest, run_id="run_loser").id == winner["id"]
        Run.objects.filter(pk=winner["id"]).update(status=RunStatus.RUNNING)
        with pytest.raises(IdempotencyInProgress):
            reserve(key="k-race", digest=digest, run_id="run_loser")


def _hash(agent_id: str, text: str) -> str:
    from runs.idempotency import request_hash

    return request_hash(agent_id=agent_id, input=text)
