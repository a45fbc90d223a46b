"""Hand-written SQL on the sessions app's tables: the fast path's seam for this app (issue 27 item 3).

Every turn a run records takes the session's next seq and an org-wide event position (in its
transaction on SQLite, from the org's sequencer after its commit on PostgreSQL), and a run reads
its session's control log between every two steps; these statements are plain SQL
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


def session_end(alias: str, *, session_id: str, status: str, now, finish_reason: str = "") -> tuple[Session, int] | None:
    """End session `session_id` with `status` unless it already ended: ONE `UPDATE … RETURNING`.

    Sets the status, `finish_reason`, `ended_at` (kept if set), `updated_at` = `now` and clears the executor
    channel. Returns the ended session and how many child sessions it has, or None when it was
    missing or had already ended (nothing written then).
    """
    connection = transaction.get_connection(alias)
    table = sql.table_name(Session, connection)
    stamp = connection.ops.adapt_datetimefield_value(now)
    terminal, finished = sql.in_list(SessionStatus.TERMINAL)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET status = %s, finish_reason = %s, ended_at = COALESCE(ended_at, %s), updated_at = %s, executor_channel = '' "
            f"WHERE id = %s AND status NOT IN ({terminal}) "
            f"RETURNING {sql.select_list(Session, connection)}, (SELECT COUNT(*) FROM {table} AS c WHERE c.parent_id = {table}.id)",
            [status, (finish_reason or "")[:32], stamp, stamp, session_id, *finished],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    return sql.from_row(Session, connection, alias, row[:-1]), int(row[-1])


def next_numbers(connection, *, session_id: str, now, count: int = 1, position: bool = True) -> tuple[int, str, int | None] | None:
    """Take the session's next `count` seqs and, with `position`, the org's next `count` event positions on `connection`.

    Returns `(last seq, root id, last position)` — the range taken is `last - count + 1 … last`
    for both — with position None when the org's clock row is missing or `position` is False
    (PostgreSQL: the sequencer positions the events after the commit, `sequence`), or None when
    the session is missing. One `UPDATE … RETURNING` on the session row, then (with `position`)
    one on the clock row: the one order every append takes, so appends never deadlock.
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
        if not position:
            return int(row[0]), row[1], None
        cursor.execute(f"UPDATE {quote(EventClock._meta.db_table)} SET last = last + %s WHERE id = 1 RETURNING last", [count])
        clock = cursor.fetchone()
    return int(row[0]), row[1], None if clock is None else int(clock[0])


def append_in_one_statement(connection, *, session_id: str, kind: str, payload_text: str, actor: str, now) -> Event | None:
    """PostgreSQL, outside any transaction: take the session's next seq and insert the event,
    still without a position, in ONE autocommit statement; return the stored event (position
    None), or None when the session is missing (nothing was changed then).

    The session row is locked only while the server runs the statement and commits it (seq
    stays dense per session: a second append of the session waits for the first's commit). No
    org-wide row is touched: the event gets its position from the org's sequencer after this
    commit (`sequence`), so appends of one org from several processes never queue on one row
    held to a commit (BENCHMARKS.md: scale-out).
    """
    quote = connection.ops.quote_name
    sessions, events = (quote(m._meta.db_table) for m in (Session, Event))
    event_id = mint_id("evt")
    stamp = connection.ops.adapt_datetimefield_value(now)
    with connection.cursor() as cursor:
        cursor.execute(
            f"""WITH s AS (
                    UPDATE {sessions} SET last_seq = last_seq + 1, updated_at = %s WHERE id = %s RETURNING last_seq, root_id
                )
                INSERT INTO {events} (id, session_id, root_id, seq, position, kind, actor, payload, created_at)
                SELECT %s, %s, s.root_id, s.last_seq, NULL, %s, %s, %s, %s FROM s
                RETURNING seq, root_id""",
            [stamp, session_id, event_id, session_id, kind, actor, payload_text, stamp],
        )
        row = cursor.fetchone()
    if row is None:
        return None
    event = Event(id=event_id, session_id=session_id, root_id=row[1], seq=int(row[0]), position=None,
                  kind=kind, actor=actor, payload=payload_text, created_at=now)
    event._state.adding, event._state.db = False, connection.alias
    return event


#: The advisory lock key of an org's sequencer. Advisory locks are per database, and each org
#: has its own database: one key serialises the sequencer runs of one org and no other.
SEQUENCER_LOCK = 0x5E9_C10C


def sequence(connection, alias: str, *, wait: bool = False) -> list[Event] | None:
    """PostgreSQL, outside any transaction: give every committed event of the org without a
    position the next positions, move the clock past them, and return them in position order;
    None when another run holds the org's sequencer lock (nothing done then).

    ONE round trip: a simple-protocol query of two statements, which PostgreSQL runs as one
    implicit transaction — `pg_try_advisory_xact_lock` (the org's sequencer lock; with `wait`
    `pg_advisory_xact_lock`, which waits), then one statement that, only if the lock was got,
    reads the unpositioned events (a fresh snapshot, taken once the lock is held: every run
    before has committed), numbers them and updates them and the clock together. The lock is
    held for that statement and the commit only, never across a client round trip, and one run
    positions every event committed so far, whoever appended it. Order: by session (in seq
    order: seq stays in position order), the sessions interleaved by when their events were
    made (a running maximum of `created_at` per session, so a session's clock skew never
    reorders its seqs), then session id. A batch of one session, made at one instant, stays
    contiguous. Nothing is positioned when the clock row is missing (`clock_restart`).
    """
    quote = connection.ops.quote_name
    events, clock = quote(Event._meta.db_table), quote(EventClock._meta.db_table)
    columns = sql.select_list(Event, connection, table="e")
    take = "(pg_advisory_xact_lock(%s) IS NOT NULL)" if wait else "pg_try_advisory_xact_lock(%s)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT set_config('agents.sequencer', {take}::text, true);
                WITH u AS (
                    SELECT id, session_id, seq, max(created_at) OVER (PARTITION BY session_id ORDER BY seq) AS made
                    FROM {events} WHERE position IS NULL AND current_setting('agents.sequencer') = 'true'
                ), todo AS (
                    SELECT id, row_number() OVER (ORDER BY made, session_id, seq) AS n, count(*) OVER () AS total FROM u
                ), c AS (
                    UPDATE {clock} SET last = last + (SELECT count(*) FROM todo) WHERE id = 1 AND EXISTS (SELECT 1 FROM todo)
                    RETURNING last
                )
                UPDATE {events} AS e SET position = c.last - todo.total + todo.n FROM todo, c WHERE e.id = todo.id
                RETURNING {columns}""",
            [SEQUENCER_LOCK],
        )
        got = cursor.fetchone()[0] == "true"
        cursor.nextset()  # the second statement's rows
        rows = cursor.fetchall()
    if not got:
        return None
    positioned = [sql.from_row(Event, connection, alias, row) for row in rows]
    positioned.sort(key=lambda e: e.position)
    return positioned


def sequencer_passed(connection, ids: list[str]) -> dict[str, int | None]:
    """PostgreSQL, outside any transaction: wait until no sequencer run of the org holds its lock
    (`pg_advisory_xact_lock_shared`: the waiters are let go together, and wait on none of
    each other), then return `{event id: position}` for events `ids` as that run left them.
    ONE round trip; the read's snapshot is taken after the wait."""
    marks, values = sql.in_list(ids)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT pg_advisory_xact_lock_shared(%s); SELECT id, position FROM {sql.table_name(Event, connection)} WHERE id IN ({marks})",
            [SEQUENCER_LOCK, *values],
        )
        cursor.nextset()
        return {row[0]: (None if row[1] is None else int(row[1])) for row in cursor.fetchall()}


def clock_state(connection) -> tuple[int, bool]:
    """Return `(clock, pending)`: the org's last position handed out (0 with no clock row) and
    whether any committed event still waits for a position (PostgreSQL's sequencer). ONE statement."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT (SELECT last FROM {quote(EventClock._meta.db_table)} WHERE id = 1), "
            f"EXISTS (SELECT 1 FROM {quote(Event._meta.db_table)} WHERE position IS NULL)"
        )
        last, pending = cursor.fetchone()
    return int(last or 0), bool(pending)


def positions_of(connection, ids: list[str]) -> dict[str, int | None]:
    """Return `{event id: position}` for events `ids` (one statement; a missing id is left out)."""
    marks, values = sql.in_list(ids)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, position FROM {sql.table_name(Event, connection)} WHERE id IN ({marks})", values)
        return {row[0]: (None if row[1] is None else int(row[1])) for row in cursor.fetchall()}


def clock_restart(connection) -> None:
    """Put back a clock row removed by hand, at the highest position any event holds (0: none)."""
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {quote(EventClock._meta.db_table)} (id, last) "
            f"SELECT 1, COALESCE(MAX(position), 0) FROM {quote(Event._meta.db_table)} ON CONFLICT (id) DO NOTHING"
        )


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
