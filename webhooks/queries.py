"""Hand-written SQL on the webhooks app's tables: the fast path's seam for this app (issue 27 item 3).

Every run's finish reads where its `run.finished` goes; composing that read with the ORM (a
correlated subquery) cost more than the rest of the finish (issue 26 item 4: the run overhead),
so it is plain SQL (`agents_site.sql` says why). Tested on SQLite and PostgreSQL
(`tests/webhooks/test_queries.py`); only identifiers from the models' metadata go into the
text, every value is a parameter.
"""

from __future__ import annotations

from django.db import transaction

from agents_site import sql
from webhooks.models import Endpoint, RunCallback


def enabled_endpoints_with_callback(run_id: str, alias: str) -> list[Endpoint]:
    """Return the enabled endpoints of database `alias`, newest first, each with `callback_url`:
    the URL run `run_id`'s request named with that endpoint (`RunCallback`), or None. ONE statement."""
    connection = transaction.get_connection(alias)
    quote = connection.ops.quote_name

    def column(model, name: str) -> str:
        return quote(model._meta.get_field(name).column)

    endpoint_pk = quote(Endpoint._meta.pk.column)
    callback = (f"SELECT c.{column(RunCallback, 'url')} FROM {sql.table_name(RunCallback, connection)} c "
                f"WHERE c.{column(RunCallback, 'run_id')} = %s AND c.{column(RunCallback, 'endpoint')} = e.{endpoint_pk} "
                f"ORDER BY c.{quote(RunCallback._meta.pk.column)} LIMIT 1")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql.select_list(Endpoint, connection, table='e')}, ({callback}) "
                       f"FROM {sql.table_name(Endpoint, connection)} e WHERE e.{column(Endpoint, 'enabled')} = %s "
                       f"ORDER BY e.{endpoint_pk} DESC", [run_id, True])
        rows = cursor.fetchall()
    width = len(Endpoint._meta.concrete_fields)
    endpoints = []
    for row in rows:
        endpoint = sql.from_row(Endpoint, connection, alias, row[:width])
        endpoint.callback_url = row[width]
        endpoints.append(endpoint)
    return endpoints


def endpoints_held(pks: list[int], alias: str) -> set[int]:
    """Hold endpoints `pks` of database `alias` against a delete until the current transaction
    ends; return the pks of those that still exist. Call inside a transaction (`org_atomic`).

    Whatever writes a row under an endpoint (a delivery, an attempt of one, a run's callback)
    holds the endpoint first, and `services.endpoint_delete` holds it (`FOR UPDATE`) before it
    collects the endpoint's rows, so the two are ordered on that one row (issue 51): a writer
    that comes second waits for the delete and then finds the endpoint gone (it skips it), a
    delete that comes second waits for the writer and then deletes what it wrote too. On
    PostgreSQL the hold is `FOR KEY SHARE`, the weakest row lock: any number of finishes and
    attempts share it, an update of the endpoint's other columns does not wait for it, only a
    DELETE does. On SQLite it is a plain read: `BEGIN IMMEDIATE` already serialises writers.
    Example: `endpoints_held([3, 7], "org_acme")` → `{3}` when endpoint 7 was deleted.
    """
    wanted = sorted({int(pk) for pk in pks})
    if not wanted:
        return set()
    connection = transaction.get_connection(alias)
    quote = connection.ops.quote_name
    pk = quote(Endpoint._meta.pk.column)
    lock = " FOR KEY SHARE" if connection.vendor == "postgresql" else ""
    marks = ", ".join(["%s"] * len(wanted))
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {pk} FROM {sql.table_name(Endpoint, connection)} WHERE {pk} IN ({marks}) ORDER BY {pk}{lock}", wanted)
        return {row[0] for row in cursor.fetchall()}
