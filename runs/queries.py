"""Hand-written SQL on the runs app's tables: the fast path's seam for this app (issue 27 item 3).

Every run reads the fees its org's runs hold, inserts its row, moves between statuses and writes its
outcome (its agent is looked up by `agents.queries`). These are the only statements that write a
run's status (`run_move`, `run_outcome`), and only `runs.lifecycle` calls them (issue 48;
`tests/runs/test_status_writes.py`). They are plain SQL (`agents_site.sql` says why: composing a query costs
more than running it). Each is tested on SQLite and PostgreSQL (`tests/runs/test_queries.py`);
only identifiers from the models' metadata go into the text, every value is a parameter.
`UPDATE … RETURNING` needs SQLite ≥ 3.35 (system check `agents.E001`).
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import transaction

from runs.models import Run
from agents_site import sql
from agents_site.vocabulary import RunStatus


def fees_held(alias: str) -> int:
    """Return the cents held by the runs of database `alias` whose status holds a fee (`RunStatus.HOLDS_FEE`): ONE statement."""
    connection = transaction.get_connection(alias)
    statuses, values = sql.in_list(RunStatus.HOLDS_FEE)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COALESCE(SUM(fee_cents), 0) FROM {sql.table_name(Run, connection)} WHERE status IN ({statuses})", values)
        return int(cursor.fetchone()[0] or 0)


def run_insert(run: Run, alias: str) -> None:
    """INSERT the new run row `run` into database `alias` in ONE plain statement (no ORM compile)."""
    sql.insert([run], transaction.get_connection(alias))


def run_move(run_id: str, *, to: str, from_statuses: frozenset, alias: str, changes: Mapping | None = None) -> bool:
    """Set run `run_id`'s status to `to` (and the columns in `changes`) if its status is in `from_statuses`; return whether it moved.

    ONE statement, `UPDATE … SET status = %s, … WHERE id = %s AND status IN (…)` (plain SQL): of
    two callers moving the same run, one wins. `changes` maps `Run` field names to values
    (`{"started_at": now}`, the usage so far of a run going `waiting`). Example:
    `run_move("run_1", to="waiting", from_statuses={"running"}, alias=…)` → True once, then False.
    """
    connection = transaction.get_connection(alias)
    quote = connection.ops.quote_name
    assignments, params = [f"{quote(Run._meta.get_field('status').column)} = %s"], [str(to)]
    for name, value in (changes or {}).items():
        field = Run._meta.get_field(name)
        assignments.append(f"{quote(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    statuses, values = sql.in_list(from_statuses)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {sql.table_name(Run, connection)} SET {', '.join(assignments)} WHERE id = %s AND status IN ({statuses})",
            [*params, run_id, *values],
        )
        return cursor.rowcount == 1


def run_outcome(run_id: str, changes: dict, *, from_statuses: frozenset, alias: str) -> Run | None:
    """Write `changes` to run `run_id` if its status is in `from_statuses`; return the finished row, or None.

    ONE statement, `UPDATE … WHERE status IN (…) RETURNING …` (plain SQL):
    two finishers never both win, and the row comes back finished without a second read.
    `changes["duration_ms"]` None means "since the run started" (0 if it never started) and
    `changes["model"]` "" keeps the recorded model; both are worked out in the statement.
    """
    connection = transaction.get_connection(alias)
    quote = connection.ops.quote_name
    assignments, params = [], []
    for name, value in changes.items():
        field = Run._meta.get_field(name)
        column = quote(field.column)
        if name == "model" and not value:
            continue
        if name == "duration_ms" and value is None:
            continue  # set below from started_at
        assignments.append(f"{column} = %s")
        params.append(field.get_db_prep_save(value, connection))
    if changes.get("duration_ms") is None:
        assignments.append(f"{quote('duration_ms')} = {_elapsed_ms_sql(connection)}")
        params.append(connection.ops.adapt_datetimefield_value(changes["finished_at"]))
    statuses, values = sql.in_list(from_statuses)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {sql.table_name(Run, connection)} SET {', '.join(assignments)} WHERE id = %s AND status IN ({statuses}) "
            f"RETURNING {sql.select_list(Run, connection)}",
            [*params, run_id, *values],
        )
        row = cursor.fetchone()
    return None if row is None else sql.from_row(Run, connection, alias, row)


def _elapsed_ms_sql(connection) -> str:
    """SQL for the whole milliseconds from `started_at` to the parameter (a datetime); 0 when never started."""
    if connection.vendor == "postgresql":
        return "COALESCE(GREATEST(0, FLOOR(EXTRACT(EPOCH FROM (%s - started_at)) * 1000))::integer, 0)"
    return "COALESCE(MAX(0, CAST((julianday(%s) - julianday(started_at)) * 86400000 AS INTEGER)), 0)"
