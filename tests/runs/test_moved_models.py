"""The run records moved from the agents app to the runs app (issue 27 item 2) without touching
their tables: a store migrated before the move migrates on in place, every row kept."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connections
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from agents.models import Agent
from agents_site.vocabulary import ApprovalState, RunKind, RunStatus
from runs.models import Approval, IdempotencyRecord, Run, RunTask
from tenancy import stores

pytestmark = pytest.mark.django_db(transaction=True)

_TABLES = {"agents_run", "agents_runtask", "agents_approval", "agents_idempotencyrecord"}


def _schema(alias: str) -> dict[str, list[str]]:
    """The moved tables' columns and the indexes on them, as the database has them."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        return {table: sorted(
            [f"col:{c.name}" for c in connection.introspection.get_table_description(cursor, table)]
            + [f"ix:{name}" for name in connection.introspection.get_constraints(cursor, table)])
            for table in sorted(_TABLES)}


def _applied(alias: str) -> set[tuple[str, str]]:
    return {(app, name) for app, name in MigrationRecorder(connections[alias]).applied_migrations() if app in ("agents", "runs")}


def test_the_models_keep_their_tables():
    assert {m._meta.db_table for m in (Run, RunTask, Approval, IdempotencyRecord)} == _TABLES
    assert {m._meta.app_label for m in (Run, RunTask, Approval, IdempotencyRecord)} == {"runs"}
    assert Run._meta.get_field("agent").related_model is Agent  # a run still names its agent


@pytest.mark.both_stores
def test_a_store_migrated_before_the_move_migrates_on_and_keeps_every_row(org_a):
    """An org store as the code before the move left it (agents at 0008, no runs migration)
    migrates in place (`stores.migrate_store`: what `manage.py migrate_orgs` and a restored backup
    run): no table is created, dropped or altered, and every run, task, approval and key reads back."""
    now = timezone.now()
    with org_a.context() as alias:
        agent = Agent.objects.create(id="agt_moved", name="moved", model="m", created_at=now, updated_at=now)
        Run.objects.create(id="run_moved", agent=agent, agent_name="moved", kind=RunKind.RUN, status=RunStatus.QUEUED,
                           fee_cents=7, input="hi", created_at=now)
        RunTask.objects.create(run_id="run_moved", task_id="q2-task", created_at=now)
        Approval.objects.create(id="apr_moved", run_id="run_moved", session_id="ses_x", tool_call_id="c1", tool_name="calculator",
                                state=ApprovalState.PENDING, created_at=now)
        IdempotencyRecord.objects.create(key="k-moved", request_hash="h", run_id="run_moved", created_at=now)
        schema = _schema(alias)
    assert ("runs", "0001_initial") in _applied(alias) and ("agents", "0009_runs_moved_out") in _applied(alias)
    # runs' own later migrations (columns added after the move) are undone first: the store as the move left it.
    call_command("migrate", "runs", "0001_initial", database=alias, verbosity=0)
    moved = _schema(alias)

    # Back to the store the code before the move left: state-only, so no table is touched.
    call_command("migrate", "agents", "0008", database=alias, verbosity=0)
    call_command("migrate", "runs", "zero", database=alias, verbosity=0)
    connections[alias].close()
    assert not {m for m in _applied(alias) if m[0] == "runs"} and ("agents", "0009_runs_moved_out") not in _applied(alias)
    assert _schema(alias) == moved

    stores.migrate_store(org_a.slug)
    assert ("runs", "0001_initial") in _applied(alias) and ("agents", "0009_runs_moved_out") in _applied(alias)
    with org_a.context():
        assert _schema(alias) == schema
        run = Run.objects.select_related("agent", "task").get(pk="run_moved")
        assert (run.agent.name, run.fee_cents, run.status, run.task.task_id) == ("moved", 7, RunStatus.QUEUED, "q2-task")
        assert list(agent.runs.values_list("id", flat=True)) == ["run_moved"]  # the reverse accessor moved with it
        assert Approval.objects.get(pk="apr_moved").tool_name == "calculator"
        assert IdempotencyRecord.objects.get(key="k-moved").run_id == "run_moved"
