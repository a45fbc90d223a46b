"""`agents_site.sql`: the plain statements of the hot paths read and write rows as the ORM does."""

from __future__ import annotations

import pytest
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections, transaction

from agents_site import sql
from agents_site.vocabulary import LedgerKind, RunKind, RunStatus

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


def test_insert_reads_back_a_key_the_database_assigns_and_stamps_auto_now_add(org_a):
    from billing.models import LedgerEntry

    connection = connections[DEFAULT_DB_ALIAS]
    entry = LedgerEntry(org_id=org_a.org.pk, kind=LedgerKind.AGENT, amount_cents=-5, run_id="run_sql1", model="m")
    sql.insert([entry], connection)

    stored = LedgerEntry.objects.get(pk=entry.pk)
    assert (stored.org_id, stored.amount_cents, stored.run_id, stored.model) == (org_a.org.pk, -5, "run_sql1", "m")
    assert entry.created_at is not None and stored.created_at == entry.created_at
    assert entry._state.adding is False


def test_insert_breaking_a_constraint_raises_and_stores_nothing(org_a):
    from billing.models import LedgerEntry

    connection = connections[DEFAULT_DB_ALIAS]
    sql.insert([LedgerEntry(org_id=org_a.org.pk, kind=LedgerKind.AGENT, amount_cents=-5, run_id="run_twice")], connection)
    with pytest.raises(IntegrityError), transaction.atomic():
        sql.insert([LedgerEntry(org_id=org_a.org.pk, kind=LedgerKind.AGENT, amount_cents=-5, run_id="run_twice")], connection)
    assert LedgerEntry.objects.filter(run_id="run_twice").count() == 1


def test_insert_takes_one_row_per_statement_when_the_database_assigns_the_key(org_a):
    from billing.models import LedgerEntry

    rows = [LedgerEntry(org_id=org_a.org.pk, kind=LedgerKind.CREDIT, amount_cents=1) for _ in range(2)]
    with pytest.raises(ValueError):
        sql.insert(rows, connections[DEFAULT_DB_ALIAS])
    assert not LedgerEntry.objects.filter(kind=LedgerKind.CREDIT, amount_cents=1).exists()


def test_an_inserted_row_reads_back_equal_through_the_orm(org_a):
    from django.utils import timezone

    from runs.models import Run
    from tenancy import stores

    with org_a.context():
        now = timezone.now()
        run = Run(id="run_sqlrow", kind=RunKind.RUN, agent_name="a", status=RunStatus.RUNNING, fee_cents=7, model="m",
                  input="héllo", actor="x/y", created_at=now, started_at=now)
        with transaction.atomic(using=stores.current_alias()):
            sql.insert([run], transaction.get_connection(stores.current_alias()))
        stored = Run.objects.get(pk="run_sqlrow")
    assert (stored.kind, stored.status, stored.fee_cents, stored.input, stored.started_at) == (
        RunKind.RUN, RunStatus.RUNNING, 7, "héllo", now)
