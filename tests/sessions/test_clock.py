"""The clock without the lock (issue 26 item 3): appends of one org take no org-wide row to their
commit (PostgreSQL: the org's sequencer positions committed events after the commit,
`sessions.clock`), and every resume guarantee stays — a reader paging the org stream and a
tree stream by `Last-Event-ID` while two writers (threads, then real processes) append gets
every event exactly once, at dense positions; a transaction that holds its event open while
others commit and a reader passes them is positioned later, never skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading

import pytest
from django.db import connections

from sessions import queries, selectors, services
from sessions.bus import get_bus
from sessions.models import Event, EventClock, Session
from sessions.stream import _replay_page
from tenancy import stores
from tests.sessions.conftest import PG_SERVER
from tests.support.live import ROOT

pytestmark = pytest.mark.django_db(transaction=True)

WAIT = 30  # seconds any wait on another thread or process may take before the test fails


class Reader:
    """Pages the org stream and one flow's stream from the store by Last-Event-ID, as a
    reconnecting client would (`sessions.stream._replay_page`, the stream's own replay)."""

    def __init__(self, slug: str, root: str) -> None:
        self.slug, self.root = slug, root
        self.cursors = {"org": 0, "tree": 0}
        self.seen: dict[str, list[tuple[int, str]]] = {"org": [], "tree": []}

    def read(self) -> None:
        """Read every page after each cursor once (what a reconnect with Last-Event-ID replays)."""
        try:
            with stores.org_context(self.slug):
                for name, root in (("org", None), ("tree", self.root)):
                    more = True
                    while more:
                        chunks, self.cursors[name], more = _replay_page(position=self.cursors[name], root=root)
                        for chunk in chunks:
                            kind, ident, data = chunk.strip().split("\n")
                            assert kind == "event: event", chunk
                            self.seen[name].append((int(ident.removeprefix("id: ")), json.loads(data.removeprefix("data: "))["event"]["id"]))
        finally:
            connections.close_all()

    def check(self) -> int:
        """Assert each stream got every event of its scope exactly once, in dense position order; return the count."""
        with stores.org_context(self.slug):
            stored = list(Event.objects.order_by("position").values_list("position", "id", "root_id"))
            assert EventClock.objects.get(pk=1).last == len(stored)
        assert [p for p, _, _ in stored] == list(range(1, len(stored) + 1))  # dense, none unpositioned
        assert self.seen["org"] == [(p, i) for p, i, _ in stored]  # each once, in order, at its stored position
        assert self.seen["tree"] == [(p, i) for p, i, root in stored if root == self.root]
        return len(stored)


def _flow(slug: str) -> tuple[Session, Session, Session]:
    with stores.org_context(slug):
        root = services.session_create(agent="lead", actor="t")
        child = services.session_create(agent="helper", actor="t", parent_session_id=root.id)
        other = services.session_create(agent="other", actor="t")
    return root, child, other


def _write(slug: str, session_ids: list[str], count: int, tag: str) -> None:
    """Append `count` turns round-robin over `session_ids`, every fourth a batch of three."""
    with stores.org_context(slug):
        for n in range(count):
            sid = session_ids[n % len(session_ids)]
            if n % 4 == 3:
                services.session_append_events(session_id=sid, events=[{"kind": "log", "payload": {tag: n, "i": i}, "actor": "t"} for i in range(3)])
            else:
                services.session_append_event(session_id=sid, kind="log", payload={tag: n}, actor="t")


def _assert_seq_dense(slug: str, *sessions: Session) -> None:
    with stores.org_context(slug):
        for session in sessions:
            seqs = list(Event.objects.filter(session_id=session.id).order_by("seq").values_list("seq", flat=True))
            assert seqs == list(range(1, len(seqs) + 1)) == list(range(1, Session.objects.get(pk=session.id).last_seq + 1))


def _hammer_while_reading(slug: str, reader: Reader, writers: list[threading.Thread]) -> None:
    for writer in writers:
        writer.start()
    while any(w.is_alive() for w in writers):
        reader.read()
    for writer in writers:
        writer.join(WAIT)
    reader.read()


@pytest.mark.both_stores
def test_two_writers_and_a_paging_reader_see_every_event_once_at_dense_positions(org_a):
    root, child, other = _flow(org_a.slug)
    errors: list[BaseException] = []

    def writer(ids: list[str], tag: str) -> threading.Thread:
        def run() -> None:
            try:
                _write(org_a.slug, ids, 40, tag)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
            finally:
                connections.close_all()

        return threading.Thread(target=run)

    reader = Reader(org_a.slug, root.root_id)
    _hammer_while_reading(org_a.slug, reader, [writer([root.id, other.id], "a"), writer([child.id, other.id], "b")])
    assert errors == []
    assert reader.check() == 2 * (30 + 10 * 3)
    _assert_seq_dense(org_a.slug, root, child, other)


APPENDER = textwrap.dedent(
    """
    import sys, django
    django.setup()
    from django.db import connections
    from tests.sessions.test_clock import _write
    slug, count, tag, session_ids = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
    print("READY", flush=True)
    sys.stdin.readline()  # the parent's go, once every process is ready
    _write(slug, session_ids, count, tag)
    connections.close_all()
    print("DONE", flush=True)
    """
)


def _child_env() -> dict:
    from django.conf import settings

    return {
        **os.environ,
        # The test's default database (its orgs) is the children's too.
        "DJANGO_SETTINGS_MODULE": "tests.support.child_settings",
        "AGENTS_TEST_DEFAULT_SQLITE": str(connections["default"].settings_dict["NAME"]),
        "AGENTS_DATA_DIR": str(settings.AGENTS_DATA_DIR),
        "AGENTS_ORG_DATABASE": "postgres",
        "DATABASE_URL": PG_SERVER,
        "AGENTS_SESSION_BUS": "local",
        "PYTHONPATH": str(ROOT),
    }


def test_two_processes_appending_to_one_postgresql_org_and_a_paging_reader(postgres_org):
    root, child, other = _flow(postgres_org.slug)
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, postgres_org.slug, "60", tag, *ids], cwd=ROOT, env=_child_env(),
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for tag, ids in (("a", [root.id, other.id]), ("b", [child.id, other.id, root.id]))
    ]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "READY", proc.stderr.read()
        for proc in procs:
            proc.stdin.write("go\n")
            proc.stdin.flush()
        reader = Reader(postgres_org.slug, root.root_id)
        while any(proc.poll() is None for proc in procs):
            reader.read()
        for proc in procs:
            out, err = proc.communicate(timeout=WAIT)
            assert proc.returncode == 0 and "DONE" in out, err
        reader.read()
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert reader.check() == 2 * (45 + 15 * 3)
    assert len(reader.seen["tree"]) > 0 and len(reader.seen["tree"]) < len(reader.seen["org"])
    _assert_seq_dense(postgres_org.slug, root, child, other)


def test_a_late_commit_is_positioned_after_what_readers_passed_never_skipped(postgres_org):
    """A transaction takes its event (seq, row) and holds open while others append and commit
    and a reader reads past them; when it commits, the reader's next page brings it, at the
    next position. With positions taken from a row held to commit, the others could not even
    append meanwhile (the test fails on that wait)."""
    slug = postgres_org.slug
    root, late, other = _flow(slug)
    took, release, others_done = threading.Event(), threading.Event(), threading.Event()
    held: list[Event] = []
    errors: list[BaseException] = []

    def hold_open() -> None:
        try:
            with stores.org_context(slug), stores.org_atomic():
                turn = services.check_turn(kind="log", payload={"late": True}, actor="t")
                held.extend(services.append_checked_turns(session_id=late.id, turns=[turn]))
                took.set()
                assert release.wait(WAIT), "never released"
                assert held[0].position is None  # not before its commit
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    def others() -> None:
        try:
            _write(slug, [root.id, other.id], 8, "o")
            others_done.set()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold_open)
    holder.start()
    try:
        assert took.wait(WAIT), errors
        writer = threading.Thread(target=others)
        writer.start()
        passed = others_done.wait(WAIT)
        assert passed, f"the other appends waited on the open transaction: {errors}"
        writer.join(WAIT)
        reader = Reader(slug, root.root_id)
        reader.read()
        ahead = 6 + 2 * 3  # 8 turns, two of them batches of three
        assert reader.cursors == {"org": ahead, "tree": ahead}
        with stores.org_context(slug):
            assert selectors.stream_head() == ahead
    finally:
        release.set()
        holder.join(WAIT)
    assert errors == []
    assert held[0].position == ahead + 1  # set on the returned event once committed
    reader.read()
    assert reader.seen["org"][-1] == reader.seen["tree"][-1] == (ahead + 1, held[0].id)
    assert reader.check() == ahead + 1
    _assert_seq_dense(slug, root, late, other)


def test_the_appender_answers_with_the_real_position_and_the_frame_carries_it(postgres_org, settings):
    import asyncio

    settings.AGENTS_SESSION_BUS = "local"

    async def scenario():
        subscription = await get_bus().subscribe(postgres_org.slug)

        def write():
            try:
                with stores.org_context(postgres_org.slug):
                    session = services.session_create(agent="a", actor="t")
                    one = services.session_append_event(session_id=session.id, kind="log", payload={"n": 1}, actor="t")
                    batch = services.session_append_events(session_id=session.id, events=[{"kind": "log", "payload": n, "actor": "t"} for n in range(3)])
                    stored = dict(Event.objects.values_list("id", "position"))
                    return [one, *batch], stored
            finally:
                connections.close_all()

        events, stored = await asyncio.to_thread(write)
        frames = []
        while (frame := await subscription.get(0.5)) is not None:
            frames.extend(frame["frames"] if frame["kind"] == "events" else [frame] if frame["kind"] == "event" else [])
        subscription.close()
        return events, stored, frames

    events, stored, frames = asyncio.run(scenario())
    assert [e.position for e in events] == [1, 2, 3, 4] == [stored[e.id] for e in events]
    assert [(f["position"], f["data"]["event"]["id"]) for f in frames] == [(e.position, e.id) for e in events]


def test_an_event_left_without_a_position_is_positioned_by_the_next_reader(postgres_org):
    """An appender that died between its commit and the sequencer leaves its event unpositioned:
    the next store read of the stream positions it (and every later append still works)."""
    from django.db import transaction
    from django.utils import timezone

    with postgres_org.context() as alias:
        session = services.session_create(agent="a", actor="t")
        services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
        orphan = queries.append_in_one_statement(transaction.get_connection(alias), session_id=session.id, kind="log",
                                                 payload_text="", actor="t", now=timezone.now())  # committed, never sequenced
        assert Event.objects.get(pk=orphan.id).position is None
        assert selectors.events_after(position=1)[0][0].id == orphan.id
        assert Event.objects.get(pk=orphan.id).position == 2 == selectors.stream_head()
        third = services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
        assert (third.seq, third.position) == (3, 3)


@pytest.mark.both_stores
def test_a_store_from_before_the_change_migrates_and_keeps_its_positions(org_a):
    """An org store at the previous migration (every position taken in the append) migrates in
    place (`stores.migrate_store`, what `manage.py migrate_orgs` and a restored backup run): its
    events keep their positions and the clock goes on from them."""
    from django.core.management import call_command

    with org_a.context() as alias:
        session = services.session_create(agent="old", actor="t")
        before = [services.session_append_event(session_id=session.id, kind="log", payload={"n": n}, actor="t") for n in range(3)]
    connections[alias].close()
    call_command("migrate", "agent_sessions", "0005", database=alias, verbosity=0)
    stores.migrate_store(org_a.slug)
    with org_a.context():
        assert list(Event.objects.order_by("seq").values_list("id", "position")) == [(e.id, e.position) for e in before] == [
            (before[0].id, 1), (before[1].id, 2), (before[2].id, 3)]
        after = services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
        assert (after.seq, after.position) == (4, 4)


def test_an_appender_that_finds_the_sequencer_busy_waits_for_that_run_not_for_a_turn_of_its_own(postgres_org):
    """While a run holds the org's sequencer lock, an append commits, fails to take the lock and
    waits (shared, beside any other waiter) for the run to end; then it positions its event."""
    import psycopg

    with postgres_org.context() as alias:
        session = services.session_create(agent="a", actor="t")
        database = connections[alias].settings_dict["NAME"]
    done: list[Event] = []
    errors: list[BaseException] = []

    def append() -> None:
        try:
            with stores.org_context(postgres_org.slug):
                done.append(services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    with psycopg.connect(f"{PG_SERVER.rsplit('/', 1)[0]}/{database}", autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (queries.SEQUENCER_LOCK,))  # a run under way
        thread = threading.Thread(target=append)
        thread.start()
        waiting = False
        for _ in range(WAIT * 20):  # until the appender waits, shared, on the lock
            waiting = holder.execute("SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                                     " AND mode = 'ShareLock')").fetchone()[0]
            if waiting or not thread.is_alive():
                break
            threading.Event().wait(0.05)
        assert waiting and not done and not errors
        with postgres_org.context():
            assert Event.objects.get().position is None  # committed, waiting for a position
        holder.execute("SELECT pg_advisory_unlock(%s)", (queries.SEQUENCER_LOCK,))
        thread.join(WAIT)
    assert errors == [] and [e.position for e in done] == [1]
