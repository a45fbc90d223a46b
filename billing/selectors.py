"""Reads of the billing app."""

from billing.models import Account, LedgerEntry


def balance_cents(*, org) -> int:
    """Return `org`'s balance in cents (0 when it has no account yet)."""
    return Account.objects.filter(org=org).values_list("balance_cents", flat=True).first() or 0


def ledger_recent(*, org, limit: int = 50) -> list[LedgerEntry]:
    """Return `org`'s newest ledger rows, newest first, at most `limit`."""
    return list(LedgerEntry.objects.filter(org=org).order_by("-created_at", "-id")[:limit])


def billing_summary(*, org_slug: str, limit: int = 50) -> dict:
    """Return `{"balanceCents", "feeCents", "ledger": [ledger view…]}` for org `org_slug`.

    `ledger` is the newest `limit` rows, newest first. Raises `BalanceUnavailable` (503) when
    the ledger cannot be read. Two queries plus the org lookup.
    """
    from django.db import DatabaseError

    from billing.meter import BalanceUnavailable, run_fee_cents
    from billing.presenters import ledger_entry_view
    from tenancy.models import Org

    try:
        org = Org.objects.filter(slug=org_slug).first()
        balance = balance_cents(org=org) if org else 0
        rows = ledger_recent(org=org, limit=limit) if org else []
    except DatabaseError as exc:
        raise BalanceUnavailable("the ledger cannot be read right now") from exc
    return {"balanceCents": balance, "feeCents": run_fee_cents(), "ledger": [ledger_entry_view(r) for r in rows]}
