"""Reads of the billing app."""

from billing.models import Account, LedgerEntry


def balance_cents(*, org) -> int:
    """Return `org`'s balance in cents (0 when it has no account yet)."""
    return Account.objects.filter(org=org).values_list("balance_cents", flat=True).first() or 0


def ledger_recent(*, org, limit: int = 50) -> list[LedgerEntry]:
    """Return `org`'s newest ledger rows, newest first, at most `limit`."""
    return list(LedgerEntry.objects.filter(org=org).order_by("-created_at", "-id")[:limit])
