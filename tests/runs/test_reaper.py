"""The session reaper ends idle and over-age sessions with a `control` stop and the reason."""

from __future__ import annotations

import json
from datetime import timedelta

from django.utils import timezone

from runs.reaper import go_duration, reap_org, sessions_reap
from agents_site.vocabulary import EventKind, SessionStatus
from sessions.control import ExecutorInbox
from sessions.models import Event, Session
from sessions.services import session_append_event, session_create

IDLE_REASON = "ended by the platform: no activity for 1h0m0s"
AGE_REASON = "ended by the platform: past the 24h0m0s a session may run"


def _session(org, *, status=SessionStatus.RUNNING, started_ago: float = 0, idle_for: float = 0) -> str:
    """Open a session whose start and last activity lie `started_ago` / `idle_for` seconds back."""
    now = timezone.now()
    with org.context():
        session = session_create(agent="worker", actor="tester", title="t", status=status)
        Session.objects.filter(pk=session.id).update(started_at=now - timedelta(seconds=started_ago), created_at=now - timedelta(seconds=started_ago), updated_at=now - timedelta(seconds=idle_for))
    return session.id


def _state(org, session_id) -> tuple[str, bool, list[tuple[str, str, dict]]]:
    with org.context():
        session = Session.objects.get(pk=session_id)
        events = [(e.kind, e.actor, json.loads(e.payload)) for e in Event.objects.filter(session_id=session_id).order_by("seq")]
    return session.status, session.ended_at is not None, events


def test_a_running_session_idle_for_an_hour_is_stopped_with_the_reason(org_a, settings):
    settings.AGENTS_SESSION_IDLE_SECONDS = 3600
    idle = _session(org_a, started_ago=4000, idle_for=3601)

    with org_a.context():
        reaped = reap_org(org=org_a.slug, now=timezone.now())

    assert [(r.session_id, r.reason) for r in reaped] == [(idle, IDLE_REASON)]
    assert _state(org_a, idle) == (SessionStatus.ERROR, True, [(EventKind.CONTROL, "platform", {"command": "stop", "message": IDLE_REASON})])


def test_a_session_open_past_its_max_life_is_stopped_even_when_paused(org_a, settings):
    settings.AGENTS_SESSION_MAX_SECONDS = 86400
    old = _session(org_a, status=SessionStatus.PAUSED, started_ago=86401, idle_for=10)

    with org_a.context():
        reaped = reap_org(org=org_a.slug, now=timezone.now())

    assert [r.reason for r in reaped] == [AGE_REASON]
    assert _state(org_a, old) == (SessionStatus.ERROR, True, [(EventKind.CONTROL, "platform", {"command": "stop", "message": AGE_REASON})])


def test_active_paused_and_finished_sessions_are_left_alone(org_a):
    active = _session(org_a, started_ago=5000, idle_for=60)
    paused = _session(org_a, status=SessionStatus.PAUSED, started_ago=5000, idle_for=5000)  # held on purpose
    finished = _session(org_a, status=SessionStatus.DONE, started_ago=90000, idle_for=90000)

    with org_a.context():
        assert reap_org(org=org_a.slug, now=timezone.now()) == []

    assert _state(org_a, active) == (SessionStatus.RUNNING, False, [])
    assert _state(org_a, paused) == (SessionStatus.PAUSED, False, [])
    assert _state(org_a, finished)[0] == SessionStatus.DONE and _state(org_a, finished)[2] == []


def test_an_event_counts_as_activity(org_a, settings):
    settings.AGENTS_SESSION_IDLE_SECONDS = 3600
    session_id = _session(org_a, started_ago=7200, idle_for=7200)
    with org_a.context():
        session_append_event(session_id=session_id, kind=EventKind.LOG, payload={"text": "still here"}, actor="tester")
        assert reap_org(org=org_a.slug, now=timezone.now()) == []
    assert _state(org_a, session_id)[0] == SessionStatus.RUNNING


def test_the_stop_reaches_a_live_executor_of_the_session(org_a, settings):
    settings.AGENTS_SESSION_IDLE_SECONDS = 3600
    session_id = _session(org_a, started_ago=4000, idle_for=0)
    with org_a.context():
        inbox = ExecutorInbox.open(session_id=session_id)  # opening it stamps activity
        Session.objects.filter(pk=session_id).update(updated_at=timezone.now() - timedelta(seconds=3601))
        try:
            reaped = reap_org(org=org_a.slug, now=timezone.now())
            command = inbox.wait(5)
        finally:
            inbox.close()

    assert [r.session_id for r in reaped] == [session_id]
    assert (command["command"], command["message"]) == ("stop", IDLE_REASON)
    assert _state(org_a, session_id)[0] == SessionStatus.ERROR


def test_the_sweep_reaps_across_orgs(org_a, org_b, settings):
    settings.AGENTS_SESSION_IDLE_SECONDS = 3600
    a = _session(org_a, started_ago=4000, idle_for=3700)
    b = _session(org_b, started_ago=4000, idle_for=3700)

    reaped = sessions_reap()

    assert sorted((r.org, r.session_id) for r in reaped) == sorted([(org_a.slug, a), (org_b.slug, b)])


def test_durations_print_like_the_reference():
    assert [go_duration(s) for s in (3600, 86400, 90, 5, 3661)] == ["1h0m0s", "24h0m0s", "1m30s", "5s", "1h1m1s"]
