"""Reads of the billing app."""

from agents_site.pagination import Page, keyset_page, page_limit
from agents_site.vocabulary import LedgerKind
from billing.models import Account, LedgerEntry
from billing import queries
from tenancy.models import Org
from billing.meter import BalanceUnavailable, run_fee_cents
from billing.presenters import ledger_entry_view

LEDGER_DEFAULT_LIMIT = 50
LEDGER_MAX_LIMIT = 200


def balance_cents(*, org) -> int:
    """Return `org`'s balance in cents (0 when it has no account yet)."""
    return Account.objects.filter(org=org).values_list("balance_cents", flat=True).first() or 0


def org_balance_cents(*, org_slug: str) -> int | None:
    """Return org `org_slug`'s balance in cents (0 without an account yet), or None when there is
    no such org: one plain statement (`billing.queries`). Raises `DatabaseError` when the ledger
    cannot be read."""
    return queries.org_balance_cents(org_slug=org_slug)


def runs_debited(*, org_slug: str, run_ids: list[str]) -> set[str]:
    """Return those of `run_ids` that org `org_slug`'s ledger holds a run debit of. One query."""
    if not run_ids:
        return set()
    return set(LedgerEntry.objects.filter(org__slug=org_slug, kind=LedgerKind.AGENT, run_id__in=list(run_ids)).values_list("run_id", flat=True))


def ledger_recent(*, org, limit: int = 50) -> list[LedgerEntry]:
    """Return `org`'s newest ledger rows, newest first, at most `limit` (≤ 200): the first page of `ledger_page`."""
    return ledger_page(org=org, limit=limit).items


def ledger_page(*, org, limit: int | None = None, cursor: str | None = None) -> Page[LedgerEntry]:
    """Return one page of `org`'s ledger, newest first (`created_at` desc, id desc).

    `limit` default 50, clamped to 200; raises `InvalidRequest` (400) for a bad limit or cursor.
    """
    return keyset_page(
        LedgerEntry.objects.filter(org=org),
        order=("-created_at", "-id"),
        limit=page_limit(limit, default=LEDGER_DEFAULT_LIMIT, maximum=LEDGER_MAX_LIMIT),
        cursor=cursor,
        tag="ledger",
    )


def billing_summary(*, org_slug: str, limit: int | None = None, cursor: str | None = None) -> dict:
    """Return `{"balanceCents", "feeCents", "ledger": [ledger view…], "nextCursor"}` for org `org_slug`.

    `ledger` is one page of rows, newest first (see `ledger_page`); `nextCursor` is None on the
    last page. Raises `InvalidRequest` (400) for a bad limit or cursor, `BalanceUnavailable`
    (503) when the ledger cannot be read. Two queries plus the org lookup.
    """
    from django.db import DatabaseError

    
    try:
        org = Org.objects.filter(slug=org_slug).first()
        balance = balance_cents(org=org) if org else 0
        page_size = page_limit(limit, default=LEDGER_DEFAULT_LIMIT, maximum=LEDGER_MAX_LIMIT)
        page = ledger_page(org=org, limit=page_size, cursor=cursor) if org else Page()
    except DatabaseError as exc:
        raise BalanceUnavailable("the ledger cannot be read right now") from exc
    return {
        "balanceCents": balance,
        "feeCents": run_fee_cents(),
        "ledger": [ledger_entry_view(r) for r in page.items],
        "nextCursor": page.next_cursor,
    }
