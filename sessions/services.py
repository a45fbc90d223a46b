"""Writes of sessions and their event log (spec 003: /v1/agents/sessions…). Org context required.

Every function here runs for the current org (`tenancy.stores.org_context`, or the request's
principal): the router sends Session and Event to that org's store and raises with no org.
Nothing is written when a function raises. Each committed write publishes one frame on the
org's stream (`sessions.bus`), after the commit, never failing the write.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from django.db import transaction
from django.utils import timezone

from agents_site.ids import mint_id
from agents_site.errors import ApiError, InvalidRequest
from agents_site.vocabulary import EventKind, SessionStatus
from sessions import bus, clock, fields, hooks, queries
from sessions.errors import SecretInTranscript, SessionFinished, SessionNotFound
from sessions.models import Event, EventClock, Session
from sessions.presenters import event_view, session_view
from sessions.scanner import rejection_message, scan_payload
from sessions.selectors import child_count, session_require
from tenancy import stores


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET = _Unset()  # a field `session_update` leaves unchanged


def _alias() -> str:
    return stores.current_alias()


def _org() -> str:
    slug = stores.current_org()
    if slug is None:
        raise stores.NoOrgSelected("sessions are written for an org")
    return slug


def _publish_session(org: str, alias: str, session: Session, *, children: int) -> None:
    view = session_view(session, org=org, children=children)
    transaction.on_commit(lambda: bus.publish(org, bus.session_frame(org=org, session_view=view)), using=alias)


def session_create(
    *,
    agent: str,
    actor: str,
    title: str = "",
    status: str = SessionStatus.RUNNING,
    parent_session_id: str | None = None,
    task_workflow_id: str = "",
    task_run_id: str = "",
    host: str = "",
    cwd: str = "",
    repo: str = "",
    target: str = "",
    terminal: str = "",
    provider: str = "",
    account: str = "",
    project: str = "",
    published: bool = False,
    executor_channel: str = "",
) -> Session:
    """Open a session in the current org and return it (spec 003: POST /v1/agents/sessions → 201).

    A `parent_session_id` of this org makes a subagent that inherits the parent's root; a
    foreign, unknown or over-long one is 400 "parentSessionId not found in this org". A
    terminal `status` (`done`/`error`) records a finished session (`ended_at` = now).
    Checks, in the reference's order (§2.3), each a 400 `InvalidRequest`: agent (required,
    ≤128 after trim), actor ≤256, title ≤512, status one of four, parent, task refs ≤256,
    host ≤256, cwd ≤1024, repo ≤512, target (exists in the org), terminal (https, ≤512),
    provider ≤64, account ≤256, project ≤128, published requires a project.
    `executor_channel` (never from a request) records the steering channel of an executor that
    attaches in this process at once (`sessions.control.executor_channel_for_new_session`).
    Publishes a `session` frame.
    """
    agent = fields.clean_agent(agent)
    actor = fields.bounded(actor, fields.MAX_ACTOR, "actor")
    title = fields.clean_title(title)
    status = fields.clean_status(status)
    parent_id = (parent_session_id or "").strip()
    root_id = ""
    if parent_id:
        parent = Session.objects.filter(pk=parent_id).only("root_id").first() if len(parent_id) <= fields.MAX_ID else None
        if parent is None:
            raise InvalidRequest("parentSessionId not found in this org")
        root_id = parent.root_id
    task_workflow_id = fields.clean_task_ref(task_workflow_id)
    task_run_id = fields.clean_task_ref(task_run_id)
    host = fields.bounded(host, fields.MAX_HOST, "host")
    cwd = fields.bounded(cwd, fields.MAX_CWD, "cwd")
    repo = fields.bounded(repo, fields.MAX_REPO, "repo")
    target = fields.clean_target(target)
    terminal = fields.clean_terminal(terminal)
    provider = fields.bounded(provider, fields.MAX_PROVIDER, "provider")
    account = fields.bounded(account, fields.MAX_ACCOUNT, "account")
    project = fields.clean_project(project)
    if published and not project:
        raise InvalidRequest(fields.PUBLISH_MESSAGE)
    org, alias = _org(), _alias()
    now = timezone.now()
    session_id = mint_id("sess")
    with stores.org_atomic():
        session = Session(
            id=session_id,
            agent=agent,
            actor=actor,
            status=status,
            parent_id=parent_id,
            root_id=root_id or session_id,
            title=title,
            task_workflow_id=task_workflow_id,
            task_run_id=task_run_id,
            host=host,
            cwd=cwd,
            repo=repo,
            target=target,
            terminal=terminal,
            provider=provider,
            account=account,
            project=project,
            published=bool(published),
            executor_channel=executor_channel[:200],
            started_at=now,
            ended_at=now if status in SessionStatus.TERMINAL else None,
            created_at=now,
            updated_at=now,
        )
        queries.session_insert(session, alias)  # one statement, not composed
        _publish_session(org, alias, session, children=0)
        if session.published:
            transaction.on_commit(lambda: _published(org, session), using=alias)
    return session


def session_update(
    *,
    session_id: str,
    status=UNSET,
    title=UNSET,
    target=UNSET,
    terminal=UNSET,
    project=UNSET,
    published=UNSET,
    cwd=UNSET,
) -> Session:
    """Change a session's surface-owned fields; an omitted (`UNSET`) field keeps its value.

    Spec 003: PATCH /v1/agents/sessions/{id} → 200. A finished session keeps its status:
    another status is 409 `SessionFinished` ("session is done; cannot change status"). Moving
    into `done`/`error` stamps `ended_at` once. `target` "" detaches, `terminal` "" withdraws;
    `published=True` needs a project (given now or stored), and a published session cannot
    drop its project (unpublish it in the same request) → else 400. Raises
    `SessionNotFound` (404), `InvalidRequest` (400). Publishes a `session` frame.
    """
    org, alias = _org(), _alias()
    with stores.org_atomic():
        session = _locked(session_id)
        now = timezone.now()
        if status is not UNSET:
            status = fields.clean_status(status)
            if session.is_finished and status != session.status:
                raise SessionFinished(f"session is {session.status}; cannot change status")
            if status in SessionStatus.TERMINAL and session.ended_at is None:
                session.ended_at = now
            session.status = status
        if title is not UNSET:
            session.title = fields.clean_title(title)
        if target is not UNSET:
            session.target = fields.clean_target(target)
        if terminal is not UNSET:
            session.terminal = fields.clean_terminal(terminal)
        if project is not UNSET:
            session.project = fields.clean_project(project)
        if cwd is not UNSET:
            session.cwd = fields.bounded(cwd, fields.MAX_CWD, "cwd")
        was_published = session.published
        if published is not UNSET:
            session.published = bool(published)
        if session.published and not session.project:
            raise InvalidRequest(fields.PUBLISH_MESSAGE)
        session.updated_at = now
        session.save()
        _publish_session(org, alias, session, children=child_count(session_id=session.id))
        if session.published and not was_published:
            transaction.on_commit(lambda: _published(org, session), using=alias)
    return session


def _published(org: str, session: Session) -> None:
    with stores.org_context(org, create=False):
        hooks.session_published_handlers(session)


def session_end(*, session_id: str, status: str, finish_reason: str = "") -> bool:
    """End a run's session `done` or `error` in one statement; return False if it had already ended.

    Status, the run's `finish_reason` (`stopped` for a user's stop), `ended_at` (kept if set),
    `updated_at`, and the executor channel cleared (its
    executor is done with it), unless the session is already finished (a finished session keeps
    its status: nothing is written then). For the run lifecycle's finish, inside its
    transaction. Publishes a `session` frame after the commit. Raises `InvalidRequest` for a
    status that does not end a session.
    """
    if status not in SessionStatus.TERMINAL:
        raise InvalidRequest(f"a session ends {' or '.join(sorted(SessionStatus.TERMINAL))}, not {status}")
    org, alias = _org(), _alias()
    ended = queries.session_end(alias, session_id=session_id, status=status, now=timezone.now(), finish_reason=finish_reason)
    if ended is None:
        return False
    session, children = ended
    _publish_session(org, alias, session, children=children)
    return True


class _DryRun(Exception):
    pass


def validate_update(*, session_id: str, **changes) -> None:
    """Check `session_update(session_id=…, **changes)` without keeping it; raise what it would.

    Runs the update inside a transaction that is always rolled back (no frame is published).
    """
    try:
        with stores.org_atomic():
            session_update(session_id=session_id, **changes)
            raise _DryRun()
    except _DryRun:
        return


def _locked(session_id: str) -> Session:
    """Return the session row locked for this transaction (FOR UPDATE on PostgreSQL)."""
    if not session_id or len(session_id) > fields.MAX_ID:
        raise SessionNotFound()
    session = Session.objects.select_for_update().filter(pk=session_id).first()
    if session is None:
        raise SessionNotFound()
    return session


def refuse_secrets(payload) -> None:
    """Raise 422 `SecretInTranscript` (with masked `findings`) if `payload` carries a credential."""
    findings = scan_payload(payload)
    if findings:
        raise SecretInTranscript(rejection_message(findings), findings=[f.as_dict() for f in findings])


def refuse_secrets_in_fields(fields: dict) -> None:
    """Raise 422 `SecretInTranscript` if any value of `fields` (`{name: JSON value}`) carries a credential.

    Each finding (masked, never the value) names its `field`. The scanner behind every text
    field a caller writes (`agents_site.schemas.scan_caller_text`).
    """
    found: list = []
    for name, value in fields.items():
        found.extend((name, finding) for finding in scan_payload(value))
    if found:
        raise SecretInTranscript(rejection_message([f for _, f in found]), findings=[{**f.as_dict(), "field": name} for name, f in found])


def session_append_event(*, session_id: str, kind: str, payload, actor: str) -> Event:
    """Append one turn to a session's log and return the stored event (spec 003: POST …/events → 201).

    `payload` is any JSON-able Python value, or None for a turn without one; it is stored as
    compact JSON text of at most 64 KiB. Order of checks (reference §2.3): session in this
    org (404 `SessionNotFound`) → kind in `EventKind` (400) → a `control` turn's payload is a
    steering command (400, `fields.check_control_payload`) → payload JSON and size (400
    "payload must be valid JSON" / "payload too large") → credential scan (422
    `SecretInTranscript`, nothing stored) → actor ≤256 (400).

    `seq` is the next of the session (dense 1..N even with concurrent appends from several
    processes), taken in the transaction that also stamps the session's `updated_at`, and
    `position` the next of the org (the stream's resume cursor; `sessions.clock`: in the same
    transaction on SQLite, from the org's sequencer right after the commit on PostgreSQL).
    Publishes an `event` frame after the commit.
    """
    with missing_session_first(session_id):
        kind, text, actor = check_turn(kind=kind, payload=payload, actor=actor)
    return append_checked(session_id=session_id, kind=kind, payload_text=text, actor=actor)


def check_turn(*, kind: str, payload, actor: str) -> tuple[str, str, str]:
    """Check one turn as `session_append_event` does, without storing it; return `(kind, payload
    text, actor)` for `append_checked_turns`.

    kind in `EventKind` (400) → a `control` turn's payload is a steering command (400) →
    payload JSON and ≤ 64 KiB (400) → credential scan (422 `SecretInTranscript`) → actor ≤256 (400).
    """
    kind = fields.clean_kind(kind)
    if kind == EventKind.CONTROL:
        fields.check_control_payload(payload)
    text = fields.dump_payload(payload)
    refuse_secrets(payload)
    return kind, text, fields.bounded(actor, fields.MAX_ACTOR, "actor")


@contextlib.contextmanager
def missing_session_first(session_id: str) -> Iterator[None]:
    """Check an append's body inside; a refusal stands only when the session exists, else 404.

    The reference's order (§2.3) puts 404 `SessionNotFound` before every check of the body.
    The session is looked up only when a check inside fails: on the way to a stored turn, the
    `UPDATE … RETURNING` that takes the seq already proves the session is in the org (and
    answers 404 when it is not), so a good append costs no separate lookup.
    """
    if not session_id or len(session_id) > fields.MAX_ID:
        raise SessionNotFound()
    try:
        yield
    except ApiError:
        session_require(session_id=session_id)
        raise


def _next_numbers(connection, *, session_id: str, now, count: int = 1, position: bool = True) -> tuple[int, str, int | None] | None:
    """Take the session's next `count` seqs and, with `position`, the org's next `count` positions; None when the session is gone.

    Returns `(last seq, root id, last position)` (`sessions.queries.next_numbers`; position
    None without `position`); a clock row removed by hand is started again.
    """
    numbers = queries.next_numbers(connection, session_id=session_id, now=now, count=count, position=position)
    if numbers is None:
        return None
    last_seq, root_id, clock = numbers
    if position and clock is None:  # the clock row was removed by hand: start it again
        EventClock.objects.create(id=1, last=count)
        clock = count
    return last_seq, root_id, clock


def append_checked(*, session_id: str, kind: str, payload_text: str, actor: str) -> Event:
    """Store one already-validated turn (see `session_append_event`); for this app's services.

    In one transaction the session row is updated first (a row lock on PostgreSQL, under the
    write lock SQLite's `BEGIN IMMEDIATE` already holds: seq dense per session), then, on
    SQLite, the org's event clock, then the event is inserted. On PostgreSQL the event is
    stored without a position and the org's sequencer gives it one right after the commit
    (`sessions.clock`); outside a caller's transaction the append there is one autocommit
    statement (`sessions.queries.append_in_one_statement`). The event returned carries its
    position once committed. Publishes the `event` frame after the commit (the sequencer's, on PostgreSQL).
    """
    return _store(session_id=session_id, turns=[(kind, payload_text, actor)])[0]


def append_checked_turns(*, session_id: str, turns: list[tuple[str, str, str]]) -> list[Event]:
    """Store turns already checked by `check_turn` (`(kind, payload text, actor)`), in order, all
    or none, in one transaction (the caller's, if it holds one); return the stored events.

    For a run's executor writing its last turns with the run's finish. Raises `SessionNotFound`.
    Inside a caller's transaction on PostgreSQL the events get their positions when it commits.
    """
    return _store(session_id=session_id, turns=turns) if turns else []


def _store(*, session_id: str, turns: list[tuple[str, str, str]]) -> list[Event]:
    """Store already-validated `(kind, payload text, actor)` turns in order, in one transaction.

    The turns take consecutive seqs (one `UPDATE … RETURNING` on the session) and then one
    insert of every row: all are stored or none. Positions: on SQLite consecutive ones from the
    clock in the same transaction, and after the commit one bus frame carries the turns in
    order; on PostgreSQL none in the transaction — after its commit the org's sequencer
    (`sessions.clock.sequence`) positions them (contiguous: a batch of one session made at one
    instant stays together), sets them on the returned events and publishes. Raises `SessionNotFound`.
    """
    org, alias = _org(), _alias()
    now = timezone.now()
    count = len(turns)
    connection = transaction.get_connection(alias)
    deferred = clock.deferred(connection)
    if count == 1 and deferred and not connection.in_atomic_block:
        kind, payload_text, actor = turns[0]
        event = queries.append_in_one_statement(connection, session_id=session_id, kind=kind, payload_text=payload_text, actor=actor, now=now)
        if event is None:
            raise SessionNotFound()
        clock.sequence(org=org, alias=alias, own=[event])  # committed already: the statement ran in autocommit
        return [event]
    with stores.org_atomic():
        numbers = _next_numbers(transaction.get_connection(alias), session_id=session_id, now=now, count=count, position=not deferred)
        if numbers is None:
            raise SessionNotFound()
        last_seq, root_id, last_position = numbers
        first_seq = last_seq - count + 1
        first_position = None if deferred else last_position - count + 1
        events = [
            Event(
                id=mint_id("evt"),
                session_id=session_id,
                root_id=root_id,
                seq=first_seq + n,
                position=None if first_position is None else first_position + n,
                kind=kind,
                actor=actor,
                payload=payload_text,
                created_at=now,
            )
            for n, (kind, payload_text, actor) in enumerate(turns)
        ]
        queries.events_insert(events, alias)
        for event in events:
            event._wire_view = event_view(event)  # the frame's view, answered to the writer too (presenters.event_view)
        if deferred:
            clock.sequence_after_commit(org=org, alias=alias, events=events)
        else:
            frames = [bus.event_frame(org=org, root=root_id, position=e.position, event_view=e._wire_view) for e in events]
            transaction.on_commit(lambda: _publish_all(org, frames), using=alias)
    return events


def _publish_all(org: str, frames: list[dict]) -> None:
    # A batch travels as one bus frame: one layer message, one slot of each subscriber's buffer.
    bus.publish(org, frames[0] if len(frames) == 1 else bus.batch_frame(org=org, frames=frames))


MAX_BATCH_EVENTS = 500  # events one batch append may carry (the body is also bounded: 1 MiB)
BATCH_SIZE_MESSAGE = f"events must be a list of 1 to {MAX_BATCH_EVENTS} events"


@contextlib.contextmanager
def at_index(index: int) -> Iterator[None]:
    """Re-raise an `InvalidRequest` raised inside as one naming event `index` of a batch.

    The message gains the prefix `events[<index>]: ` and the body the extra `"index": <index>`.
    """
    try:
        yield
    except InvalidRequest as exc:
        raise InvalidRequest(f"events[{index}]: {exc.message}", index=index, **exc.extras) from exc


def session_append_events(*, session_id: str, events: list[dict]) -> list[Event]:
    """Append a batch of turns to a session's log, all or none; return the stored events in order.

    Spec 003 `POST …/events` with `{"events": [...]}` (issue 16). `events` is a list of 1 to 500
    `{"kind": str, "payload": <JSON value or None>, "actor": str}` (the caller's default actor
    already filled in). Each is checked exactly as `session_append_event` checks one turn; the
    first invalid one answers 400 `InvalidRequest` naming it (`"events[3]: kind must be …"`,
    extra `index`: 3). Every payload is scanned: a credential in any refuses the whole batch
    with 422 `SecretInTranscript` whose findings each carry the `index` of their event. Then
    one transaction stores them with consecutive seqs and positions (dense, in list order; no
    other append interleaves) and one `event` frame per event is published after the commit.
    Nothing is stored when this raises. 404 `SessionNotFound` when the session is not in the
    org; 400 for an empty or over-long list.
    """
    with missing_session_first(session_id):
        if not isinstance(events, list) or not 1 <= len(events) <= MAX_BATCH_EVENTS:
            raise InvalidRequest(BATCH_SIZE_MESSAGE)
        turns: list[tuple[str, str, str]] = []
        found_all: list = []  # scanner findings, for the 422 sentence
        findings: list[dict] = []  # their wire form, each naming its event
        for index, item in enumerate(events):
            with at_index(index):
                kind = fields.clean_kind(item.get("kind"))
                payload = item.get("payload")
                if kind == EventKind.CONTROL:
                    fields.check_control_payload(payload)
                text = fields.dump_payload(payload)
                found = scan_payload(payload)
                actor = fields.bounded(item.get("actor"), fields.MAX_ACTOR, "actor")
            found_all.extend(found)
            findings.extend({**f.as_dict(), "index": index} for f in found)
            turns.append((kind, text, actor))
        if findings:
            raise SecretInTranscript(rejection_message(found_all), findings=findings)
    return _store(session_id=session_id, turns=turns)


def session_stream_delta(*, session_id: str, root_id: str, run_id: str, text: str) -> None:
    """Publish one piece of a reply being written on the org's session stream (`event: delta`).

    Ephemeral: nothing is stored (the turn is recorded whole as a `message` event when the reply
    is complete) and a resumed stream does not replay it. `text` is already masked. Org context
    required; never raises into the writer.
    """
    org = _org()
    bus.publish(org, bus.delta_frame(org=org, root=root_id or session_id, session_id=session_id, run_id=run_id, text=text))


def session_set_executor_channel(*, session_id: str, channel: str) -> None:
    """Record `channel` as the bus channel of the session's live executor (sessions.control)."""
    if not Session.objects.filter(pk=session_id).update(executor_channel=channel):
        raise SessionNotFound()


def session_clear_executor_channel(*, session_id: str, channel: str) -> bool:
    """Clear the executor channel if it is still `channel`; return True when it was."""
    return bool(Session.objects.filter(pk=session_id, executor_channel=channel).update(executor_channel=""))


def session_set_task_refs(*, session_id: str, task_workflow_id: str, task_run_id: str = "") -> None:
    """Record the durable task carrying this session (`taskWorkflowId`, `taskRunId`).

    Set by the task engine (runs.background) once the queue accepted the task; from then on
    the session is task-backed: its control commands are handed to that task. Each reference is
    ≤256 characters (400). Raises `SessionNotFound`. Org context required.
    """
    task_workflow_id = fields.clean_task_ref(task_workflow_id)
    task_run_id = fields.clean_task_ref(task_run_id)
    if not Session.objects.filter(pk=session_id).update(task_workflow_id=task_workflow_id, task_run_id=task_run_id):
        raise SessionNotFound()
