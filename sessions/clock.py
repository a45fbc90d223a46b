"""The org's event clock: who gives an event its org-wide `position`, and when (issue 26 item 3).

`position` is the `id:` of a stream frame and the cursor `Last-Event-ID` resumes from, so it
must be dense and a reader must never pass over a position that fills in later.

* SQLite: an append takes its positions in its own transaction (the store has one writer at a
  time: `BEGIN IMMEDIATE`), the clock row included. Nothing here runs.
* PostgreSQL: an append never touches the clock. It stores its events with position NULL and,
  right after its commit, runs the org's sequencer (`sequence`): one short transaction under a
  per-org advisory lock that positions every committed event still without one and moves the
  clock with them, then publishes their frames. A reader reads only positioned events at or
  below the clock (both committed together), so an append whose commit comes late is simply
  positioned later: nothing below the clock can still appear. Appends of one org from several
  processes therefore queue on no row held to a commit; the sequencer's lock is held for one
  statement and a commit, once for every event committed meanwhile, and an appender that finds
  it taken waits for that run (with every other waiter) instead of queueing for a run of its
  own (BENCHMARKS.md: scale-out).
  A reader that finds committed events still waiting (their appender died between its commit
  and the sequencer) runs the sequencer itself, so they are never stranded.

Services (the appends) and selectors (the stream's reads) both call here; it writes only the
positions and the clock, and publishes only event frames.
"""

from __future__ import annotations

import logging

from django.db import transaction

from sessions import bus, queries
from sessions.models import Event
from sessions.presenters import event_view

logger = logging.getLogger(__name__)


def deferred(connection) -> bool:
    """Return True when appends on `connection`'s store leave positions to the sequencer (PostgreSQL)."""
    return connection.vendor == "postgresql"


def _frame(org: str, event: Event, own: dict[str, Event]) -> dict:
    mine = own.get(event.id)
    if mine is not None:
        mine.position = event.position
        view = mine._wire_view = event_view(mine)  # the view the appender answers with (kept on it)
    else:
        view = event_view(event)
    return bus.event_frame(org=org, root=event.root_id, position=event.position, event_view=view)


#: Times an appender tries for the sequencer lock (each failed try waits for the run under way)
#: before it waits its turn for the lock itself.
TRIES = 8


def sequence(*, org: str, alias: str, own: list[Event] = ()) -> list[Event]:
    """Position every committed event of org `org` (store `alias`) that has none, publish their
    frames, and return them in position order. PostgreSQL only; outside any transaction.

    `own` are events the caller appended and committed: each gets its `position` set, whether
    this run or another (another process's, a reader's) positioned it. The caller tries for the
    org's sequencer lock (`queries.sequence`, one round trip); when a run of someone else holds
    it, the caller does not queue for it — it waits for that run to end, together with every
    other waiter (`queries.sequencer_passed`), and finds its events positioned by it unless it
    committed after that run looked; then it tries again. So under load one run positions the
    events of many appenders and the rest only wait for it. A reader (`own` empty) tries once.
    A clock row removed by hand is put back at the highest position held. Frames go out after
    the sequencer's commit, as one bus frame for the whole run (a subscriber's buffer takes it
    as one). Never raises: a failure is logged and the events wait for the next run (any
    append or stream read of the org).
    """
    connection = transaction.get_connection(alias)
    mine = {e.id: e for e in own}
    positioned: list[Event] = []
    try:
        for attempt in range(TRIES):
            run = queries.sequence(connection, alias, wait=bool(mine) and attempt == TRIES - 1)
            if run is not None:  # this run held the lock: every event committed before it is positioned now
                positioned = run
                done = {e.id for e in run}
                rest = [i for i in mine if i not in done]
                if rest:  # positioned by an earlier run, or (clock row gone) by none
                    known = queries.positions_of(connection, rest)
                    if any(p is None for p in known.values()):
                        queries.clock_restart(connection)
                        positioned = run + (queries.sequence(connection, alias, wait=True) or [])
                    for event_id, position in known.items():
                        if position is not None:
                            mine[event_id].position = position
                break
            if not mine:
                break  # a reader: the run under way positions and publishes what is committed
            for event_id, position in queries.sequencer_passed(connection, [i for i, e in mine.items() if e.position is None]).items():
                mine[event_id].position = position
            if all(e.position is not None for e in mine.values()):
                break
    except Exception:  # the events are committed; their positions come with the next run
        logger.warning("event sequencer of %s failed; the events wait for the next run", org, exc_info=True)
        return []
    if positioned:
        frames = [_frame(org, e, mine) for e in positioned]
        bus.publish(org, frames[0] if len(frames) == 1 else bus.batch_frame(org=org, frames=frames))
    return positioned


def sequence_after_commit(*, org: str, alias: str, events: list[Event]) -> None:
    """Run the sequencer for `events` (appended in the current transaction of `alias`) once it
    commits; at once when no transaction is open. Their `position` is set by then."""
    transaction.on_commit(lambda: sequence(org=org, alias=alias, own=events), using=alias)


def head(*, org: str, alias: str) -> int:
    """Return the org's newest event position (0 for an empty log); every position up to it is committed.

    On PostgreSQL, outside a transaction, committed events still waiting for a position are
    positioned (and published) first, so a reader never waits on an appender that died
    between its commit and its sequencer run. One statement when none wait.
    """
    connection = transaction.get_connection(alias)
    last, pending = queries.clock_state(connection)
    if pending and deferred(connection) and not connection.in_atomic_block:
        if sequence(org=org, alias=alias):
            last, _ = queries.clock_state(connection)
    return last
