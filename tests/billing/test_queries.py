"""billing.queries (issue 27 item 3): the balance read, the ledger insert and the debit's update,
each on SQLite and PostgreSQL."""

from __future__ import annotations

import uuid

import pytest
from django.db import IntegrityError, connection, transaction

from agents_site.vocabulary import LedgerKind
from billing import queries
from billing.models import Account, LedgerEntry
from billing.services import credit_add
from tenancy.models import Org

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def _bare_org() -> Org:
    return Org.objects.create(slug=f"bare-{uuid.uuid4().hex[:8]}", name="bare")  # no account yet


def test_org_balance_cents_is_none_for_no_org_zero_without_an_account_then_the_balance(db):
    org = _bare_org()
    assert queries.org_balance_cents(org_slug="no-such-org") is None
    assert queries.org_balance_cents(org_slug=org.slug) == 0
    credit_add(org=org, cents=250, actor="test")
    assert queries.org_balance_cents(org_slug=org.slug) == 250


def test_account_debit_changes_nothing_without_an_account(db):
    org = _bare_org()
    assert queries.account_debit(connection, org_id=org.pk, cents=5) is False
    assert not Account.objects.filter(org=org).exists()


def test_account_debit_takes_the_cents_off_the_balance(org_a):
    credit_add(org=org_a.org, cents=100, actor="test")
    assert queries.account_debit(connection, org_id=org_a.org.pk, cents=30) is True
    assert Account.objects.get(org=org_a.org).balance_cents == 70


def test_ledger_insert_stores_the_row_and_refuses_a_second_debit_of_one_run(org_a):
    def debit() -> LedgerEntry:
        return LedgerEntry(org_id=org_a.org.pk, kind=LedgerKind.AGENT, amount_cents=-10, run_id="run_q1", model="m", actor="a")

    first = debit()
    queries.ledger_insert(first, connection)
    assert first.pk is not None
    assert LedgerEntry.objects.get(pk=first.pk).amount_cents == -10
    with pytest.raises(IntegrityError), transaction.atomic():
        queries.ledger_insert(debit(), connection)
    assert LedgerEntry.objects.filter(run_id="run_q1").count() == 1
