"""The run machinery's django-q2 tasks moved to `runs.tasks` (issue 27 item 2): tasks and
schedules queued before under `agents.tasks.…` still run, and new ones use the new names."""

from __future__ import annotations

import json
import pydoc

import pytest
from django.core.management import call_command
from django_q.models import Schedule

from agents_site.vocabulary import RunStatus
from runs import tasks
from tests.agents.conftest import debits, make_agent, stored_runs
from tests.support.task_queue import TaskQueue, task_queue  # noqa: F401  (fixture)

OLD_NAMES = ("execute_run", "resume_run", "recover_runs", "sweep")


@pytest.fixture(autouse=True)
def _empty_queue(task_queue):
    """Every test starts with an empty broker queue (a Redis list outlives a test)."""


def test_the_old_dotted_paths_resolve_as_the_worker_resolves_them():
    """django-q2's worker turns a queued task's `func` into the function with `pydoc.locate`."""
    for name in OLD_NAMES:
        assert pydoc.locate(f"agents.tasks.{name}") is getattr(tasks, name) is pydoc.locate(f"runs.tasks.{name}")


def test_a_run_queued_under_the_old_task_name_is_executed_by_it(funded, upstream):
    make_agent(funded)
    response = funded.client.post("/v1/agents/helper/run", json.dumps({"input": "hello", "background": True}),
                                  content_type="application/json")
    assert response.status_code == 202, response.content
    run_id = response.json()["runId"]
    assert len(TaskQueue().ids("runs.tasks.execute_run")) == 1 and TaskQueue().ids("agents.tasks.execute_run") == []

    assert pydoc.locate("agents.tasks.execute_run")(funded.slug, run_id) == RunStatus.OK  # a task queued before the move

    (run,) = stored_runs(funded)
    assert (run.id, run.status, run.output) == (run_id, RunStatus.OK, "ok") and len(debits(funded)) == 1
    assert len(upstream.chat_requests) == 1


def test_ensure_schedules_moves_the_old_sweep_schedule_to_the_new_name(db):
    Schedule.objects.create(name="agents: sweep", func="agents.tasks.sweep", schedule_type=Schedule.CRON, cron="* * * * *", repeats=-1)

    call_command("ensure_schedules", verbosity=0)

    (sweep,) = Schedule.objects.filter(name="agents: sweep")
    assert (sweep.func, sweep.cron) == ("runs.tasks.sweep", "* * * * *")
    assert pydoc.locate(sweep.func) is tasks.sweep
