"""The billing gate and the run debit (billing/meter.py)."""

from __future__ import annotations

import sqlite3

import pytest

from agents_site.errors import Forbidden
from agents_site.vocabulary import LedgerKind
from billing.meter import BalanceUnavailable, InsufficientBalance, balance_authorize, run_charge, run_fee_cents
from billing.models import Account, LedgerEntry
from billing.services import credit_add

pytestmark = [pytest.mark.django_db, pytest.mark.both_stores]


@pytest.mark.parametrize(("configured", "fee"), [(100, 100), (250, 250), (0, 0), (-1, 100)])
def test_fee_comes_from_the_setting_and_negative_falls_back(settings, configured, fee):
    settings.CLOUD_AGENT_FEE_CENTS = configured
    assert run_fee_cents() == fee


def test_gate_passes_a_funded_org_and_returns_the_fee(org_a, settings):
    settings.CLOUD_AGENT_FEE_CENTS = 100
    credit_add(org=org_a.org, cents=100)
    assert balance_authorize(org_slug=org_a.slug, actor="a/u") == 100


def test_gate_refuses_without_a_principal(org_a, settings):
    settings.CLOUD_AGENT_FEE_CENTS = 100
    credit_add(org=org_a.org, cents=1000)
    with pytest.raises(Forbidden, match="a validated principal is required to run an agent"):
        balance_authorize(org_slug=org_a.slug, actor=" ")


def test_gate_counts_the_fees_runs_in_flight_hold(org_a, settings):
    settings.CLOUD_AGENT_FEE_CENTS = 100
    credit_add(org=org_a.org, cents=250)
    assert balance_authorize(org_slug=org_a.slug, actor="a/u", held_cents=100) == 100
    with pytest.raises(InsufficientBalance) as refused:
        balance_authorize(org_slug=org_a.slug, actor="a/u", held_cents=200)
    assert refused.value.body() == {
        "status": 402, "code": "insufficient_balance", "error": "the org's balance cannot pay for this run; add credits",
        "feeCents": 100, "balanceCents": 250, "heldCents": 200,
    }


def test_gate_is_503_when_the_ledger_cannot_be_read(org_a, settings, refuse_ledger):
    settings.CLOUD_AGENT_FEE_CENTS = 100
    credit_add(org=org_a.org, cents=1000)
    with refuse_ledger(), pytest.raises(BalanceUnavailable) as refused:
        balance_authorize(org_slug=org_a.slug, actor="a/u")
    assert refused.value.status == 503 and str(refused.value.code) == "balance_unavailable"


def test_free_runs_never_read_the_ledger(org_a, settings, refuse_ledger):
    settings.CLOUD_AGENT_FEE_CENTS = 0
    with refuse_ledger():
        assert balance_authorize(org_slug=org_a.slug, actor="a/u") == 0


def test_debit_moves_money_once_per_run_even_when_repeated(org_a):
    credit_add(org=org_a.org, cents=500)
    first = run_charge(org_slug=org_a.slug, run_id="run_1", cents=100, model="best", actor="a/u", request_id="req_1")
    again = run_charge(org_slug=org_a.slug, run_id="run_1", cents=100, model="best", actor="a/u", request_id="req_1")
    assert first is not None and again is None
    [row] = LedgerEntry.objects.filter(org=org_a.org, kind=LedgerKind.AGENT)
    assert (row.run_id, row.amount_cents, row.model, row.actor, row.request_id) == ("run_1", -100, "best", "a/u", "req_1")
    assert Account.objects.get(org=org_a.org).balance_cents == 400


def test_the_first_money_movement_of_an_org_opens_its_account(org_a):
    Account.objects.filter(org=org_a.org).delete()
    row = run_charge(org_slug=org_a.slug, run_id="run_first", cents=30, model="m", actor="a/u")
    assert row is not None and LedgerEntry.objects.get(pk=row.pk).run_id == "run_first"
    assert Account.objects.get(org=org_a.org).balance_cents == -30


def test_a_debit_for_an_org_that_is_gone_moves_nothing(org_a, caplog):
    assert run_charge(org_slug="no-such-org", run_id="run_gone", cents=30, model="m", actor="a/u") is None
    assert "debit of run run_gone" in caplog.text
    assert not LedgerEntry.objects.filter(run_id="run_gone").exists()


def test_debit_is_retried_through_a_transient_ledger_failure(org_a, refuse_ledger):
    credit_add(org=org_a.org, cents=500)
    with refuse_ledger(actions=(sqlite3.SQLITE_INSERT,), times=1):
        row = run_charge(org_slug=org_a.slug, run_id="run_2", cents=100, model="m", actor="a/u")
    assert row is not None
    assert LedgerEntry.objects.filter(org=org_a.org, kind=LedgerKind.AGENT).count() == 1
    assert Account.objects.get(org=org_a.org).balance_cents == 400


def test_debit_that_keeps_failing_is_logged_and_moves_nothing(org_a, refuse_ledger, caplog):
    credit_add(org=org_a.org, cents=500)
    with refuse_ledger(actions=(sqlite3.SQLITE_INSERT,)):
        assert run_charge(org_slug=org_a.slug, run_id="run_3", cents=100, model="m", actor="a/u") is None
    assert "debit of run run_3 (100 cents" in caplog.text
    assert not LedgerEntry.objects.filter(org=org_a.org, kind=LedgerKind.AGENT).exists()
    assert Account.objects.get(org=org_a.org).balance_cents == 500


def test_debit_refuses_without_a_principal(org_a):
    with pytest.raises(Forbidden):
        run_charge(org_slug=org_a.slug, run_id="run_4", cents=100, model="m", actor="")
    assert not LedgerEntry.objects.filter(org=org_a.org, kind=LedgerKind.AGENT).exists()


def test_every_fee_rule_is_billings_a_run_that_calls_no_model_costs_nothing(settings):
    """The fee of each kind (issue 27 item 2: no fee rule outside billing), incl. a preset's fixed reply (0)."""
    from agents_site.vocabulary import RunKind
    from billing.meter import fee_for_kind

    settings.CLOUD_AGENT_FEE_CENTS = 100
    settings.AGENTS_CHAT_FEE_CENTS = 5
    settings.AGENTS_OPENAI_FEE_CENTS = -1  # unset: the run fee
    settings.AGENTS_CODING_FEE_CENTS = 30
    assert [fee_for_kind(k) for k in (RunKind.RUN, RunKind.CHAT, RunKind.OPENAI, RunKind.CODING)] == [100, 5, 100, 30]
    assert [fee_for_kind(k, calls_model=False) for k in (RunKind.RUN, RunKind.CHAT, RunKind.CODING)] == [0, 0, 0]
