"""sessions.queries (issue 27 item 3): the numbers an append takes, the one-statement append and
the org's sequencer (issue 26 item 3), a session's end and its control log, each on SQLite and
PostgreSQL (the one-statement append and the sequencer on PostgreSQL, the only store that runs them)."""

from __future__ import annotations

import json

import pytest
from django.db import transaction
from django.utils import timezone

from agents_site.vocabulary import EventKind, SessionStatus
from sessions import queries, services
from sessions.models import Event, EventClock, Session
from tenancy import stores

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.both_stores]


def _connection():
    return transaction.get_connection(stores.current_alias())


def test_next_numbers_takes_count_seqs_and_positions_in_one_order(org_a):
    with org_a.context():
        one = services.session_create(agent="a", actor="t/ann")
        two = services.session_create(agent="a", actor="t/ann")
        head = EventClock.objects.get(pk=1).last
        with stores.org_atomic():
            assert queries.next_numbers(_connection(), session_id=one.id, now=timezone.now(), count=3) == (3, one.root_id, head + 3)
            assert queries.next_numbers(_connection(), session_id=two.id, now=timezone.now()) == (1, two.root_id, head + 4)
        assert Session.objects.get(pk=one.id).last_seq == 3
        assert EventClock.objects.get(pk=1).last == head + 4


def test_next_numbers_of_a_missing_session_changes_nothing(org_a):
    with org_a.context():
        services.session_create(agent="a", actor="t/ann")
        head = EventClock.objects.get(pk=1).last
        with stores.org_atomic():
            assert queries.next_numbers(_connection(), session_id="sess_missing", now=timezone.now()) is None
        assert EventClock.objects.get(pk=1).last == head


def test_next_numbers_says_when_the_clock_row_is_gone(org_a):
    with org_a.context():
        session = services.session_create(agent="a", actor="t/ann")
        EventClock.objects.all().delete()
        with stores.org_atomic():
            assert queries.next_numbers(_connection(), session_id=session.id, now=timezone.now()) == (1, session.root_id, None)


def test_next_numbers_without_position_leaves_the_clock_alone(org_a):
    with org_a.context():
        session = services.session_create(agent="a", actor="t/ann")
        head = EventClock.objects.get(pk=1).last
        with stores.org_atomic():
            assert queries.next_numbers(_connection(), session_id=session.id, now=timezone.now(), count=2, position=False) == (2, session.root_id, None)
        assert EventClock.objects.get(pk=1).last == head


def _postgres_only(store_kind: str) -> None:
    if store_kind != "postgres":
        pytest.skip("PostgreSQL only: SQLite has no UPDATE in a WITH clause nor advisory locks, and the services never call it there")


def test_append_in_one_statement_stores_the_event_without_a_position(org_a, store_kind):
    _postgres_only(store_kind)
    with org_a.context():
        session = services.session_create(agent="a", actor="t/ann")
        head = EventClock.objects.get(pk=1).last
        event = queries.append_in_one_statement(_connection(), session_id=session.id, kind=EventKind.MESSAGE,
                                                payload_text='{"text":"hi"}', actor="t/ann", now=timezone.now())
        assert (event.seq, event.position, event.root_id) == (1, None, session.root_id)
        assert Event.objects.get(pk=event.id).payload == '{"text":"hi"}' and Event.objects.get(pk=event.id).position is None
        assert queries.append_in_one_statement(_connection(), session_id="sess_missing", kind=EventKind.MESSAGE,
                                               payload_text="{}", actor="t/ann", now=timezone.now()) is None
        assert EventClock.objects.get(pk=1).last == head and queries.clock_state(_connection()) == (head, True)


def test_sequence_positions_every_committed_event_in_seq_order_per_session(org_a, store_kind):
    _postgres_only(store_kind)
    now = timezone.now()
    with org_a.context() as alias:
        one = services.session_create(agent="a", actor="t")
        two = services.session_create(agent="a", actor="t")
        head = EventClock.objects.get(pk=1).last
        # One's second turn was made "earlier" than its first (clocks of two processes): seq order still wins.
        stamps = [(one, now), (two, now - timezone.timedelta(seconds=2)), (one, now - timezone.timedelta(seconds=5)), (two, now)]
        made = [queries.append_in_one_statement(_connection(), session_id=s.id, kind="log", payload_text="", actor="t", now=at)
                for s, at in stamps]
        positioned = queries.sequence(_connection(), alias)
        assert [e.position for e in positioned] == list(range(head + 1, head + 5))
        order = [(e.session_id, e.seq) for e in positioned]
        assert order.index((one.id, 1)) < order.index((one.id, 2)) and order.index((two.id, 1)) < order.index((two.id, 2))
        assert sorted(e.id for e in positioned) == sorted(e.id for e in made)
        assert queries.clock_state(_connection()) == (head + 4, False)
        assert queries.sequence(_connection(), alias) == []  # nothing left: the clock stays
        assert EventClock.objects.get(pk=1).last == head + 4


def test_sequence_needs_the_clock_row_and_clock_restart_puts_it_back(org_a, store_kind):
    _postgres_only(store_kind)
    with org_a.context() as alias:
        session = services.session_create(agent="a", actor="t")
        services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
        EventClock.objects.all().delete()
        queries.append_in_one_statement(_connection(), session_id=session.id, kind="log", payload_text="", actor="t", now=timezone.now())
        assert queries.sequence(_connection(), alias) == []
        queries.clock_restart(_connection())
        assert [e.position for e in queries.sequence(_connection(), alias)] == [2]


def test_session_end_ends_once_and_counts_the_children(org_a):
    with org_a.context():
        parent = services.session_create(agent="a", actor="t/ann", executor_channel="chan")
        services.session_create(agent="a", actor="t/ann", parent_session_id=parent.id)
        ended, children = queries.session_end(stores.current_alias(), session_id=parent.id, status=SessionStatus.DONE, now=timezone.now())
        assert (ended.status, ended.executor_channel, children) == (SessionStatus.DONE, "", 1)
        assert ended.ended_at is not None and ended == Session.objects.get(pk=parent.id)
        assert queries.session_end(stores.current_alias(), session_id=parent.id, status=SessionStatus.ERROR, now=timezone.now()) is None
        assert Session.objects.get(pk=parent.id).status == SessionStatus.DONE


def test_control_events_reads_only_control_turns_after_the_cursor(org_a):
    with org_a.context():
        session = services.session_create(agent="a", actor="t/ann")
        services.session_append_event(session_id=session.id, kind=EventKind.MESSAGE, payload={"text": "hi"}, actor="t/ann")
        first = services.session_append_event(session_id=session.id, kind=EventKind.CONTROL, payload={"command": "pause"}, actor="t/ann")
        second = services.session_append_event(session_id=session.id, kind=EventKind.CONTROL, payload={"command": "resume"}, actor="t/ann")
        alias = stores.current_alias()
        assert [e.id for e in queries.control_events(alias, session_id=session.id, after=0, limit=10)] == [first.id, second.id]
        assert [e.id for e in queries.control_events(alias, session_id=session.id, after=first.seq, limit=10)] == [second.id]
        assert [e.id for e in queries.control_events(alias, session_id=session.id, after=0, limit=1)] == [first.id]


def test_stop_recorded_returns_the_first_stop_of_the_session_only(org_a):
    from sessions.control import control_send

    with org_a.context():
        session = services.session_create(agent="a", actor="t/ann")
        other = services.session_create(agent="a", actor="t/bob")
        alias = stores.current_alias()
        control_send(session_id=session.id, command="pause", actor="t/ann")
        control_send(session_id=other.id, command="stop", actor="t/bob")
        with stores.org_atomic():
            assert queries.stop_recorded(alias, session_id=session.id) is None
        control_send(session_id=session.id, command="stop", message="enough", actor="t/ann")
        with stores.org_atomic():
            payload, actor = queries.stop_recorded(alias, session_id=session.id)
        assert json.loads(payload) == {"command": "stop", "message": "enough"} and actor == "t/ann"
        assert queries.stop_recorded(alias, session_id="sess_missing") is None


def test_stop_recorded_finds_a_stop_whose_keys_come_in_any_order(org_a):
    """The events API stores a control payload as the client wrote it (found by review: a
    prefix match missed `{"message":…,"command":"stop"}`)."""
    with org_a.context():
        session = services.session_create(agent="a", actor="t/ann")
        services.session_append_event(session_id=session.id, kind=EventKind.CONTROL, payload={"command": "pause"}, actor="t/ann")
        services.session_append_event(session_id=session.id, kind=EventKind.CONTROL, payload={"message": "halt", "command": "stop"},
                                      actor="t/bob")
        with stores.org_atomic():
            payload, actor = queries.stop_recorded(stores.current_alias(), session_id=session.id)
        assert json.loads(payload) == {"message": "halt", "command": "stop"} and actor == "t/bob"
