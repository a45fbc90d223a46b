"""Hand-written SQL on billing's tables: the fast path's seam for this app (issue 27 item 3).

The balance gate reads the balance before every run and the meter debits after it, so these
statements are plain SQL (`agents_site.sql` says why). Each is tested on SQLite and PostgreSQL
(`tests/billing/test_queries.py`); only identifiers from the models' metadata go into the text.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS, router, transaction

from agents_site import sql
from billing.models import Account, LedgerEntry
from tenancy.models import Org


def org_balance_cents(*, org_slug: str) -> int | None:
    """Return org `org_slug`'s balance in cents (0 without an account yet), or None when there is no such org.

    ONE statement (the org joined to its account). Raises `DatabaseError` when the ledger
    cannot be read.
    """
    connection = transaction.get_connection(router.db_for_read(Account) or DEFAULT_DB_ALIAS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT a.balance_cents FROM {sql.table_name(Org, connection)} o "
            f"LEFT JOIN {sql.table_name(Account, connection)} a ON a.org_id = o.id WHERE o.slug = %s",
            [org_slug],
        )
        row = cursor.fetchone()
    return None if row is None else int(row[0] or 0)


def ledger_insert(entry: LedgerEntry, connection) -> None:
    """INSERT one new ledger row on `connection` (its primary key set on `entry`); raises
    `IntegrityError` when the row breaks a constraint (a second debit of one run)."""
    sql.insert([entry], connection)


def account_debit(connection, *, org_id: int, cents: int) -> bool:
    """Take `cents` off org `org_id`'s balance in ONE statement on `connection`; return False
    when the org has no account yet (nothing was changed then)."""
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {sql.table_name(Account, connection)} SET balance_cents = balance_cents - %s "
                       "WHERE org_id = %s", [cents, org_id])
        return cursor.rowcount > 0
