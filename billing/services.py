"""Writes of the billing app: accounts, credits and run debits (default database)."""

from django.db import DEFAULT_DB_ALIAS, IntegrityError, router, transaction
from django.db.models import F

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import LedgerKind
from billing import queries
from billing.models import Account, LedgerEntry


def account_for(*, org) -> Account:
    """Return `org`'s account, creating it at 0 cents on first use."""
    account, _ = Account.objects.get_or_create(org=org)
    return account


def credit_add(*, org, cents: int, actor: str = "", note: str = "") -> LedgerEntry:
    """Add `cents` (> 0) to `org`'s balance with a `credit` ledger row; return the row.

    Raises `InvalidRequest` for a non-positive amount.
    """
    if cents <= 0:
        raise InvalidRequest("a credit must be a positive number of cents")
    with transaction.atomic():
        account_for(org=org)
        Account.objects.filter(org=org).update(balance_cents=F("balance_cents") + cents)
        return LedgerEntry.objects.create(org=org, kind=LedgerKind.CREDIT, amount_cents=cents, actor=actor, note=note)


def run_debit(*, org, run_id: str, cents: int, model: str, actor: str, request_id: str = "") -> LedgerEntry | None:
    """Debit one successful run: `cents` off `org`'s balance, once per `run_id`.

    Idempotent: a second call for the same run returns None and moves no money (the unique
    `(org, run_id)` constraint on debits decides, even across processes). Returns the new row.
    `org` is the `Org` (only its primary key is used). One transaction: the row's plain
    `INSERT` and the balance's `UPDATE` (`billing.queries`; the account is opened at 0 cents
    on the org's first money movement).
    """
    if cents <= 0:
        return None
    entry = LedgerEntry(org_id=org.pk, kind=LedgerKind.AGENT, amount_cents=-cents, run_id=run_id, model=model[:200],
                        actor=actor[:300], request_id=request_id[:128])
    connection = transaction.get_connection(router.db_for_write(LedgerEntry) or DEFAULT_DB_ALIAS)
    try:
        with transaction.atomic(using=connection.alias):
            queries.ledger_insert(entry, connection)
            if not queries.account_debit(connection, org_id=org.pk, cents=cents):
                account_for(org=org)  # the org's first money movement: open its account at 0
                Account.objects.filter(org_id=org.pk).update(balance_cents=F("balance_cents") - cents)
            return entry
    except IntegrityError:
        return None
