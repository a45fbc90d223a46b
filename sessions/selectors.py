"""Reads of sessions and their event log (spec 003: GET /v1/agents/sessions…). Org context required.

Every read runs against the current org's store; another org's id is simply not there, so it
is a 404 exactly like an unknown one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.db import router
from django.db.models import Count, IntegerField, OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce

from agents_site.errors import InvalidRequest
from agents_site.pagination import Page, keyset_page, page_limit
from agents_site.vocabulary import EventKind, SessionStatus
from sessions import clock, fields, queries
from sessions.errors import SessionNotFound
from sessions.models import Event, PositionGap, Session
from tenancy import stores

LIST_DEFAULT_LIMIT = 100
LIST_MAX_LIMIT = 500
RECENT_EVENTS = 50
TREE_MAX_NODES = 10_000
CONTROL_PAGE = 200


@dataclass
class SessionRow:
    """A session with its direct-child count and newest event (None when it has none)."""

    session: Session
    children: int
    last_event: Event | None


def session_get(*, session_id: str) -> Session:
    """Return session `session_id` of the current org; raise `SessionNotFound` (404).

    An empty id or one over 128 characters is a 404 too (reference §2.3).
    """
    if not session_id or len(session_id) > fields.MAX_ID:
        raise SessionNotFound()
    session = Session.objects.filter(pk=session_id).first()
    if session is None:
        raise SessionNotFound()
    return session


def session_require(*, session_id: str) -> None:
    """Raise `SessionNotFound` (404) unless session `session_id` is in the current org (one cheap query)."""
    if not session_id or len(session_id) > fields.MAX_ID or not Session.objects.filter(pk=session_id).exists():
        raise SessionNotFound()


def executor_channel(*, session_id: str) -> str:
    """Return the bus channel of the session's live executor, "" when none is registered."""
    return Session.objects.filter(pk=session_id).values_list("executor_channel", flat=True).first() or ""


def child_count(*, session_id: str) -> int:
    """Return the number of direct children of session `session_id`."""
    return Session.objects.filter(parent_id=session_id).count()


def clamp_limit(limit: int | None, *, default: int = LIST_DEFAULT_LIMIT, maximum: int = LIST_MAX_LIMIT) -> int:
    """Return `limit` when it is in 1..maximum, else `default` (never an error; reference §2.0).

    Only the public builds index keeps this silent rule; the org's lists use
    `agents_site.pagination.page_limit` (clamped, 400 below 1).
    """
    if limit is None or limit < 1 or limit > maximum:
        return default
    return limit


def _annotated(queryset: QuerySet) -> QuerySet:
    """Return `queryset` annotated with `child_count` and `last_event_id` (subqueries, no extra query)."""
    children = (
        Session.objects.filter(parent_id=OuterRef("id")).order_by().values("parent_id").annotate(n=Count("id")).values("n")
    )
    newest = Event.objects.filter(session_id=OuterRef("id")).order_by("-seq").values("id")[:1]
    return queryset.annotate(
        child_count=Coalesce(Subquery(children, output_field=IntegerField()), Value(0)),
        last_event_id=Subquery(newest),
    )


def _rows(queryset: QuerySet) -> list[SessionRow]:
    """Return `SessionRow`s for `queryset` in two queries (sessions with counts; last events)."""
    return _with_last_events(list(_annotated(queryset)))


def _with_last_events(sessions: list[Session]) -> list[SessionRow]:
    """Return `SessionRow`s for sessions read through `_annotated`, fetching their last events in one query."""
    wanted = [s.last_event_id for s in sessions if s.last_event_id]
    events = Event.objects.in_bulk(wanted) if wanted else {}
    return [SessionRow(s, s.child_count, events.get(s.last_event_id)) for s in sessions]


def session_list(
    *,
    root: str | None = None,
    parent: str | None = None,
    status: str | None = None,
    project: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Page[SessionRow]:
    """Return one page of the org's sessions, newest first (`created_at` desc, then id asc), two queries.

    Scope: `root` → that whole flow; else `parent` → its direct children; else ROOT sessions
    only. `status` must be one of the four words (400), `project` filters exactly; `limit`
    default 100, clamped to 500, below 1 a 400; `cursor` a `nextCursor` of this list (400 otherwise).
    """
    queryset = Session.objects.all()
    if root:
        queryset = queryset.filter(root_id=root)
    elif parent:
        queryset = queryset.filter(parent_id=parent)
    else:
        queryset = queryset.filter(parent_id="")
    if status is not None:  # exactly one of the four words, as documented ("" included: 400)
        if status not in SessionStatus.values:
            raise InvalidRequest(fields.STATUS_MESSAGE)
        queryset = queryset.filter(status=status)
    if project:
        queryset = queryset.filter(project=project)
    page = keyset_page(
        _annotated(queryset),
        order=("-created_at", "id"),
        limit=page_limit(limit, default=LIST_DEFAULT_LIMIT, maximum=LIST_MAX_LIMIT),
        cursor=cursor,
        tag="sessions",
    )
    return Page(items=_with_last_events(page.items), next_cursor=page.next_cursor)


EVENTS_DEFAULT_LIMIT = 100
EVENTS_MAX_LIMIT = 500


def session_events(*, session_id: str, limit: int | None = None, cursor: str | None = None) -> Page[Event]:
    """Return one page of session `session_id`'s log, oldest first (by `seq`, dense 1..N).

    `limit` default 100, clamped to 500; `cursor` a `nextCursor` of this list. Walking the
    pages reads the whole log once, in order; events appended during the walk come at its end.
    Raises `SessionNotFound` (404), `InvalidRequest` (400) for a bad limit or cursor. Two queries.
    """
    session = session_get(session_id=session_id)
    return keyset_page(
        Event.objects.filter(session_id=session.id),
        order=("seq",),
        limit=page_limit(limit, default=EVENTS_DEFAULT_LIMIT, maximum=EVENTS_MAX_LIMIT),
        cursor=cursor,
        tag="events",
    )


@dataclass
class SessionDetail:
    """One session with its direct children and its newest events (oldest of those first)."""

    row: SessionRow
    children: list[SessionRow]
    recent_events: list[Event]


def session_detail(*, session_id: str) -> SessionDetail:
    """Return a session, its direct children (each with counts) and its 50 newest events.

    Spec 003: GET /v1/agents/sessions/{id}. Raises `SessionNotFound` (404).
    """
    session = session_get(session_id=session_id)
    recent = list(Event.objects.filter(session_id=session.id).order_by("-seq")[:RECENT_EVENTS])
    recent.reverse()
    children = _rows(Session.objects.filter(parent_id=session.id).order_by("created_at", "id"))
    row = SessionRow(session, len(children), recent[-1] if recent else None)
    return SessionDetail(row=row, children=children, recent_events=recent)


def session_tree(*, session_id: str) -> tuple[Session, dict[str, list[Session]]]:
    """Return `(session, children_by_parent_id)` for the subagent flow under `session_id`.

    The flow is one indexed read on `root_id` (at most 10 000 nodes, oldest first); the shape
    is assembled in memory. Raises `SessionNotFound` (404).
    """
    session = session_get(session_id=session_id)
    flow = list(Session.objects.filter(root_id=session.root_id).order_by("created_at", "id")[:TREE_MAX_NODES])
    by_parent: dict[str, list[Session]] = {}
    for node in flow:
        if node.parent_id:
            by_parent.setdefault(node.parent_id, []).append(node)
    return session, by_parent


def control_commands(*, session_id: str, after: int | None) -> tuple[list[Event], int]:
    """Return the session's `control` events with seq > `after` (oldest first, ≤200) and the next cursor.

    Spec 003: GET …/{id}/control. A negative or absent `after` reads from 0; the cursor is
    the highest seq returned, or `after` when nothing is newer. Raises `SessionNotFound`.
    """
    session = session_get(session_id=session_id)
    return control_events_after(session_id=session.id, after=after)


def control_events_after(*, session_id: str, after: int | None) -> tuple[list[Event], int]:
    """`control_commands` for a session known to exist (its own executor reading): one query, no 404.

    Returns the `control` events with seq > `after` (oldest first, ≤200) and the next cursor;
    an unknown session simply has none.
    """
    cursor = max(after or 0, 0)
    events = queries.control_events(router.db_for_read(Event), session_id=session_id, after=cursor, limit=CONTROL_PAGE)  # plain SQL: read between every two steps
    return events, (events[-1].seq if events else cursor)


def stop_recorded(*, session_id: str) -> dict | None:
    """Return the first `stop` recorded in session `session_id`'s control log, or None.

    The command as the executor receives it (`command`, `message`, `payload`, `push` when
    recorded) plus `actor`, who recorded it. Locks the session row first on PostgreSQL, so a
    stop recorded at the same moment is either returned or finds the session ended (409): for
    the run lifecycle's finish, inside its transaction (`sessions.queries.stop_recorded`).
    """
    found = queries.stop_recorded(router.db_for_write(Event), session_id=session_id)
    if found is None:
        return None
    payload, actor = found
    return {**json.loads(payload), "actor": actor}


def stream_head() -> int:
    """Return the org's newest event position (0 for an empty log): every position up to it is committed.

    On PostgreSQL committed events still waiting for the org's sequencer are positioned first
    (`sessions.clock.head`; the one write a read may cause, and only then).
    """
    org = stores.current_org()
    if org is None:
        raise stores.NoOrgSelected("the event log is read for an org")
    return clock.head(org=org, alias=router.db_for_read(Event))


def position_void(position: int) -> bool:
    """Return True when `position` lies in a gap a restore left (no event holds it, ever).

    A client's cursor there was handed out by a store that has since been replaced by a backup
    (tenancy `restore_org`): the events it had seen up to it are gone.
    """
    return position > 0 and PositionGap.objects.filter(after__lt=position, until__gt=position).exists()


def resume_point(last_event_id: int | None) -> tuple[int, bool]:
    """Return `(head, reset)` for a stream resuming after `last_event_id` (None: from the head).

    `reset` is True when the id cannot be resumed from: beyond the log's head (a made-up id)
    or inside a gap a restore left (`position_void`). The stream then sends `reset` with the
    head and goes on from there.
    """
    head = stream_head()
    if last_event_id is None:
        return head, False
    return head, last_event_id > head or position_void(last_event_id)


def events_after(*, position: int, root: str | None = None, limit: int = 500) -> tuple[list[Event], int]:
    """Return `(events, horizon)`: events with position > `position`, in position order.

    `root` narrows to one flow. `horizon` is the highest position this read covers: every
    event of the org up to it is either in `events` or outside `root` (so a reader can move
    its cursor there). A position at or below the head (the clock, read first) is committed
    and never changes, and a later commit gets a later position (`sessions.clock`), so nothing
    at or below the head can still appear later.
    """
    head = stream_head()
    if head <= position:
        return [], position
    queryset = Event.objects.filter(position__gt=position, position__lte=head)
    if root:
        queryset = queryset.filter(root_id=root)
    events = list(queryset.order_by("position")[:limit])
    horizon = events[-1].position if len(events) == limit else max(head, position)
    return events, horizon


def log_before(*, session_id: str, before: int) -> list[tuple[int, str, object]]:
    """Return the session's turns with seq < `before` as `(seq, kind, payload)`, oldest first.

    The checkpoint a run waiting for approval is rebuilt from (issue 28: the log is the
    checkpoint). Payloads are decoded JSON (None when unreadable). An unknown session has none.
    """
    rows = Event.objects.filter(session_id=session_id, seq__lt=before).order_by("seq").values_list("seq", "kind", "payload")
    turns = []
    for seq, kind, payload in rows.iterator():
        try:
            turns.append((seq, kind, json.loads(payload or "null")))
        except ValueError:
            turns.append((seq, kind, None))
    return turns


def last_control_actor(*, session_id: str) -> str:
    """Return who recorded the session's newest `control` event ("" when none)."""
    return Event.objects.filter(session_id=session_id, kind=EventKind.CONTROL).order_by("-seq").values_list("actor", flat=True).first() or ""


def session_log(*, session_id: str, limit: int) -> list[Event]:
    """Return the first `limit` events of session `session_id` in order (none for an empty id)."""
    if not session_id:
        return []
    return list(Event.objects.filter(session_id=session_id).order_by("seq")[:limit])
