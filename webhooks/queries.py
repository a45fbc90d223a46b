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
