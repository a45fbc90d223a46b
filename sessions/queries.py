"""Hand-written SQL on the sessions app's tables: the fast path's seam for this app (issue 27 item 3).

Every turn a run records takes the session's next seq and the org's next event position, and a
run reads its session's control log between every two steps; these statements are plain SQL
(`agents_site.sql` says why: composing a query costs more than running it). Each is tested on
SQLite and PostgreSQL (`tests/sessions/test_queries.py`). Only identifiers from the models'
metadata go into the text; every value is a parameter. `UPDATE … RETURNING` needs SQLite ≥ 3.35
(system check `agents.E001`).
"""

from __future__ import annotations

import json

from django.db import transaction

from agents_site import sql
from agents_site.ids import mint_id
from agents_site.vocabulary import ControlCommand, EventKind, SessionStatus
from sessions.models import Event, EventClock, Session


def session_insert(session: Session, alias: str) -> None:
    """INSERT the new session row `session` into database `alias` in ONE plain statement."""
    sql.insert([session], transaction.get_connection(alias))


def events_insert(events: list[Event], alias: str) -> None:
    """INSERT the new event rows `events` (seq and position already taken) into database `alias` in ONE statement."""
    sql.insert(events, transaction.get_connection(alias))


def session_end(alias: str, *, session_id: str, status: str, now) -> tuple[Session, int] | None:
    """End session `session_id` with `status` unless it already ended: ONE `UPDATE … RETURNING`.

    Sets the status, `ended_at` (kept if set), `updated_at` = `now` and clears the executor
    channel. Returns the ended session and how many child sessions it has, or None when it was
    missing or had already ended (nothing written then).
    """
    connection = transaction.get_connection(alias)
    table = sql.table_name(Session, connection)
    stamp = connection.ops.adapt_datetimefield_value(now)
    terminal, finished = sql.in_list(SessionStatus.TERMINAL)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET status = %s, ended_at = COALESCE(ended_at, %s), updated_at = %s, executor_channel = '' "
            f"WHERE id = %s AND status NOT IN ({terminal}) "
            f"RETURNING {sql.select_list(Session, connection)}, (SELECT COUNT(*) FROM {table} AS c WHERE c.parent_id = {table}.id)",
            [status, stamp, stamp, session_id, *finished],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return sql.from_row(Session, connection, alias, row[:-1]), int(row[-1])


def next_numbers(connection, *, session_id: str, now, count: int = 1) -> tuple[int, str, int | None] | None:
    """Take the session's next `count` seqs and the org's next `count` event positions on `connection`.

    Returns `(last seq, root id, last position)` — the range taken is `last - count + 1 … last`
    for both — with position None when the org's clock row is missing, or None when the session
    is. Two `UPDATE … RETURNING` statements: the session row first, then the clock row, the one
    order every append takes (so appends never deadlock and positions follow commit order).
    """
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(Session._meta.db_table)} SET last_seq = last_seq + %s, updated_at = %s WHERE id = %s RETURNING last_seq, root_id",
            [count, connection.ops.adapt_datetimefield_value(now), session_id],
        )
        row = cursor.fetchone()
        if row is None:
            return None
        cursor.execute(f"UPDATE {quote(EventClock._meta.db_table)} SET last = last + %s WHERE id = 1 RETURNING last", [count])
        clock = cursor.fetchone()
    return int(row[0]), row[1], None if clock is None else int(clock[0])


def append_in_one_statement(connection, *, session_id: str, kind: str, payload_text: str, actor: str, now) -> Event | None:
    """PostgreSQL, outside any transaction: take seq and position and insert the event in ONE
    autocommit statement; return the stored event, or None when no row was written (the
    session is missing, or the org's clock row is: nothing was changed then).

    The same order as `next_numbers` (the session row, then the clock row) and the same
    guarantees (seq dense per session, position in commit order), but the org-wide clock
    row is locked only while the server runs the statement and commits it, not across the
    four client round trips (and whatever the Python thread waits for between them) of
    BEGIN … UPDATE … UPDATE … INSERT … COMMIT. That lock held across round trips made a
    second daphne process wait instead of work (BENCHMARKS.md: scale-out).
    """
    quote = connection.ops.quote_name
    sessions, clock, events = (quote(m._meta.db_table) for m in (Session, EventClock, Event))
    event_id = mint_id("evt")
    stamp = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH s AS (
                    UPDATE {sessions} SET last_seq = last_seq + 1, updated_at = %s
                    WHERE id = %s AND EXISTS (SELECT 1 FROM {clock} WHERE id = 1)
                    RETURNING last_seq, root_id
                ), c AS (
                    UPDATE {clock} SET last = last + 1 WHERE id = 1 AND EXISTS (SELECT 1 FROM s) RETURNING last
                )
                INSERT INTO {events} (id, session_id, root_id, seq, position, kind, actor, payload, created_at)
                SELECT %s, %s, s.root_id, s.last_seq, c.last, %s, %s, %s, %s FROM s, c
                RETURNING seq, position, root_id""",
            [stamp, session_id, event_id, session_id, kind, actor, payload_text, stamp],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    event = Event(id=event_id, session_id=session_id, root_id=row[2], seq=int(row[0]), position=int(row[1]),
                  kind=kind, actor=actor, payload=payload_text, created_at=now)
    event._state.adding, event._state.db = False, connection.alias
    return event


def control_events(alias: str, *, session_id: str, after: int, limit: int) -> list[Event]:
    """Return session `session_id`'s `control` events with seq > `after`, oldest first, at most `limit`: ONE statement."""
    connection = transaction.get_connection(alias)
    with connection.cursor() as db:
        db.execute(
            f"SELECT {sql.select_list(Event, connection)} FROM {sql.table_name(Event, connection)} "
            "WHERE session_id = %s AND kind = %s AND seq > %s ORDER BY seq LIMIT %s",
            [session_id, str(EventKind.CONTROL), after, limit],
        )
        return [sql.from_row(Event, connection, alias, row) for row in db.fetchall()]


def stop_recorded(alias: str, *, session_id: str) -> tuple[str, str] | None:
    """Return `(payload text, actor)` of the first `stop` recorded in session `session_id`'s control log, or None.

    On PostgreSQL the session row is locked first (`FOR UPDATE`; SQLite's write transaction
    already excludes every other writer): a stop being recorded at the same moment
    (`sessions.control.control_send` locks the same row before it appends) has either committed
    before this read, and is returned, or waits and then finds the session ended. The session's
    control events are read (an index range: a session holds a handful) and each payload is
    parsed: a stop appended through the events API may name its keys in any order. For the run
    lifecycle's finish and a resume, inside their transaction. One statement on SQLite, two on
    PostgreSQL.
    """
    connection = transaction.get_connection(alias)
    sessions, events = sql.table_name(Session, connection), sql.table_name(Event, connection)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"SELECT 1 FROM {sessions} WHERE id = %s FOR UPDATE", [session_id])
        cursor.execute(f"SELECT payload, actor FROM {events} WHERE session_id = %s AND kind = %s ORDER BY seq",
                       [session_id, str(EventKind.CONTROL)])
        for payload, actor in cursor.fetchall():
            try:
                command = json.loads(payload)
            except ValueError:
                continue
            if isinstance(command, dict) and command.get("command") == ControlCommand.STOP:
                return payload, actor
    return None
