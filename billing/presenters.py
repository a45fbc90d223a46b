"""Turn ledger rows into their wire views (camelCase, RFC 3339)."""

from __future__ import annotations

from agents_site.wire import compact, rfc3339
from billing.models import LedgerEntry


def ledger_entry_view(entry: LedgerEntry) -> dict:
    """Return `{id, kind, amountCents, runId?, model?, actor?, requestId?, note?, createdAt}`."""
    return compact(
        {
            "id": entry.pk,
            "kind": entry.kind,
            "amountCents": entry.amount_cents,
            "runId": entry.run_id,
            "model": entry.model,
            "actor": entry.actor,
            "requestId": entry.request_id,
            "note": entry.note,
            "createdAt": rfc3339(entry.created_at),
        },
        keep=("id", "kind", "amountCents", "createdAt"),
    )
