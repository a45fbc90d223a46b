"""Hand-written SQL on the agents app's tables: the fast path's seam for this app (issue 27 item 3).

Every run looks its agent up with one plain statement (`agents_site.sql` says why: composing a query
costs more than running it); the run's own statements are `runs.queries`. Tested on SQLite and
PostgreSQL (`tests/runs/test_queries.py`); only identifiers from the model's metadata go into the
text, every value is a parameter.
"""

from __future__ import annotations

from django.db import transaction

from agents.models import Agent
from agents_site import sql


def agents_by_id_or_name(ref: str, *, alias: str) -> list[Agent]:
    """Return the agents (at most two) whose id or name is `ref`, from database `alias`: ONE statement."""
    connection = transaction.get_connection(alias)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql.select_list(Agent, connection)} FROM {sql.table_name(Agent, connection)} WHERE id = %s OR name = %s LIMIT 2",
                       [ref, ref])
        return [sql.from_row(Agent, connection, alias, row) for row in cursor.fetchall()]
