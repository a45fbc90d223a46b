"""Resume cursors across a restore of the org's store (issue 35): the clock moves to a new epoch
and the positions in between are void (`PositionGap`); the stream resets a cursor there."""

from __future__ import annotations

import asyncio

from django.db import transaction

from sessions import selectors, services
from sessions.restore_hooks import clock_head, clock_void_through
from sessions.stream import session_stream

EPOCH = 2**32


def _restore_at_head(org) -> None:
    """What restore_org does to the restored store: move the clock to the next epoch."""
    with org.context() as alias, transaction.atomic(using=alias):
        clock_void_through(alias, EPOCH)


def _frames(org, last_event_id, count):
    async def scenario():
        stream = session_stream(org=org.slug, root=None, last_event_id=last_event_id)
        try:
            return [await stream.__anext__() for _ in range(count)]
        finally:
            await stream.aclose()

    return asyncio.run(scenario())


def test_a_cursor_from_before_the_moment_resumes_one_from_after_is_reset(org_a, settings):
    settings.AGENTS_SSE_CATCHUP_SECONDS = 60
    with org_a.context():
        session = services.session_create(agent="coder", actor="t")
        for _ in range(3):
            services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
    _restore_at_head(org_a)  # the store holds positions 1..3; the replaced one had handed out more
    with org_a.context() as alias:
        assert clock_head(alias) == EPOCH
        assert selectors.resume_point(2) == (EPOCH, False)
        assert selectors.resume_point(3) == (EPOCH, False)
        assert selectors.resume_point(7) == (EPOCH, True)  # handed out by the store that was replaced
        assert selectors.resume_point(EPOCH) == (EPOCH, False)  # the head a reset names
        assert selectors.resume_point(EPOCH + 1) == (EPOCH, True)
        event = services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
    assert event.position == EPOCH + 1  # no position is ever reused
    frames = _frames(org_a, 2, 2)
    assert frames[0] == ": stream open\n\n" and frames[1].startswith("event: event\nid: 3\n")
    assert _frames(org_a, 7, 2) == [": stream open\n\n", f'event: reset\nid: {EPOCH + 1}\ndata: {{"head":{EPOCH + 1}}}\n\n']


def test_a_stream_open_across_the_restore_is_told_at_its_next_store_read(org_a):
    from sessions.stream import _replay_page

    with org_a.context():
        session = services.session_create(agent="coder", actor="t")
        services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
    _restore_at_head(org_a)
    with org_a.context():
        # A stream whose cursor (5) came from the replaced store reads the store (a gap, a catch-up):
        chunks, cursor, more = _replay_page(position=5, root=None)
        kept = _replay_page(position=1, root=None)
    assert chunks == [f'event: reset\nid: {EPOCH}\ndata: {{"head":{EPOCH}}}\n\n'] and cursor == EPOCH and more
    assert kept == ([], EPOCH, False)  # a cursor the restored store still holds reads on, no reset
