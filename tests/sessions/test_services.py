"""The write services: dense seq and position under concurrency (threads, processes, PostgreSQL),
frames published only after commit, and the Python-value contract of session_append_event."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading

import pytest
from django.db import connections, transaction

from agents_site.errors import InvalidRequest
from sessions import services
from sessions.bus import get_bus
from sessions.models import Event, EventClock, Session
from tenancy import stores
from tests.support.live import ROOT, server_env

PG_SERVER = "postgres://postgres@127.0.0.1:5432/postgres"


def _assert_dense(slug: str, session_ids: list[str], total: int) -> None:
    with stores.org_context(slug):
        for sid in session_ids:
            seqs = list(Event.objects.filter(session_id=sid).order_by("seq").values_list("seq", flat=True))
            assert seqs == list(range(1, len(seqs) + 1))
            assert Session.objects.get(pk=sid).last_seq == len(seqs)
        positions = list(Event.objects.order_by("position").values_list("position", flat=True))
        assert positions == list(range(1, total + 1))
        assert EventClock.objects.get(pk=1).last == total


def test_64_concurrent_appends_get_seq_1_to_64(org_a):
    with org_a.context():
        session = services.session_create(agent="racer", actor="t")
    errors: list[BaseException] = []
    barrier = threading.Barrier(64)

    def append(n: int) -> None:
        try:
            barrier.wait()
            with stores.org_context(org_a.slug):
                services.session_append_event(session_id=session.id, kind="log", payload={"n": n}, actor="t")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=append, args=(n,)) for n in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    _assert_dense(org_a.slug, [session.id], 64)



def test_concurrent_single_and_batch_appends_keep_seq_dense_and_each_batch_contiguous(org_a):
    with org_a.context():
        session = services.session_create(agent="racer", actor="t")
    errors: list[BaseException] = []
    batches: list[list[int]] = []
    barrier = threading.Barrier(16)

    def work(n: int) -> None:
        try:
            barrier.wait()
            with stores.org_context(org_a.slug):
                if n % 2:
                    for i in range(4):
                        services.session_append_event(session_id=session.id, kind="log", payload={"n": n, "i": i}, actor="t")
                else:
                    stored = services.session_append_events(
                        session_id=session.id, events=[{"kind": "log", "payload": {"n": n, "i": i}, "actor": "t"} for i in range(10)]
                    )
                    batches.append([e.seq for e in stored])
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    total = 8 * 4 + 8 * 10
    _assert_dense(org_a.slug, [session.id], total)
    assert len(batches) == 8
    for seqs in batches:  # no single append landed inside a batch
        assert seqs == list(range(seqs[0], seqs[0] + 10))
    with stores.org_context(org_a.slug):
        for seqs in batches:
            rows = list(Event.objects.filter(session_id=session.id, seq__in=seqs).order_by("seq").values_list("payload", flat=True))
            assert [int(r.split('"i":')[1].rstrip("}")) for r in rows] == list(range(10))


def test_a_batch_publishes_one_frame_after_commit_and_nothing_when_refused(org_a):
    bus = get_bus()
    seen: list[dict] = []

    async def listen():
        subscription = await bus.subscribe(org_a.slug)
        try:
            with stores.org_context(org_a.slug):
                session = await asyncio.to_thread(_make_and_refuse_then_append, org_a.slug)
            while True:
                frame = await subscription.get(5)
                if frame is None:
                    return session
                seen.append(frame)
                if frame["kind"] == "events":
                    return session
        finally:
            subscription.close()

    session_id = asyncio.run(listen())
    batch = [f for f in seen if f["kind"] == "events"]
    assert len(batch) == 1 and [f["data"]["event"]["seq"] for f in batch[0]["frames"]] == [1, 2, 3]
    assert [f["position"] for f in batch[0]["frames"]] == [1, 2, 3] and batch[0]["position"] == 3
    assert all(f["data"]["event"]["sessionId"] == session_id for f in batch[0]["frames"])
    assert not [f for f in seen if f["kind"] == "event"]  # the refused batch published nothing


def _make_and_refuse_then_append(slug: str) -> str:
    try:
        with stores.org_context(slug):
            session = services.session_create(agent="pub", actor="t")
            with pytest.raises(InvalidRequest):
                services.session_append_events(session_id=session.id, events=[{"kind": "log"}, {"kind": "nope"}])
            services.session_append_events(session_id=session.id, events=[{"kind": "log", "payload": n, "actor": "t"} for n in range(3)])
            return session.id
    finally:
        connections.close_all()


APPENDER = textwrap.dedent(
    """
    import sys, threading, time, django
    django.setup()
    from django.db import connections
    from tenancy import stores
    from sessions.services import session_append_event
    slug, per_thread = sys.argv[1], int(sys.argv[2])
    session_ids = sys.argv[3:]
    print("READY", flush=True)
    sys.stdin.readline()  # the parent's go, once every process is ready
    def work(t):
        with stores.org_context(slug):
            for i in range(per_thread):
                sid = session_ids[(t + i) % len(session_ids)]
                session_append_event(session_id=sid, kind="log", payload={"t": t, "i": i}, actor="proc")
        connections.close_all()
    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    """
)


def _run_appenders(slug: str, session_ids: list[str], *, processes: int, per_thread: int, env: dict) -> None:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", APPENDER, slug, str(per_thread), *session_ids],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "READY", proc.stderr.read()
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "Traceback" not in err, err  # a thread's exception leaves the exit code 0


def test_appends_from_three_processes_keep_seq_and_position_dense(org_a):
    with org_a.context():
        one = services.session_create(agent="racer", actor="t")
        two = services.session_create(agent="racer", actor="t")
    # This run's data directory and its default database (as every child server gets them): the
    # children once opened a `default.db` of their own in the data directory instead.
    env = server_env()
    _run_appenders(org_a.slug, [one.id, two.id], processes=3, per_thread=6, env=env)
    _assert_dense(org_a.slug, [one.id, two.id], 3 * 4 * 6)
    with org_a.context():
        assert Session.objects.get(pk=one.id).last_seq == Session.objects.get(pk=two.id).last_seq == 36


def test_appends_from_three_processes_keep_seq_and_position_dense_on_postgresql(postgres_org):
    from django.conf import settings

    with postgres_org.context():
        one = services.session_create(agent="racer", actor="t")
        two = services.session_create(agent="racer", actor="t")
    env = {
        **os.environ,
        # The test's default database (its orgs and restore records) is the children's too.
        "DJANGO_SETTINGS_MODULE": "tests.support.child_settings",
        "AGENTS_TEST_DEFAULT_SQLITE": str(connections["default"].settings_dict["NAME"]),
        "AGENTS_DATA_DIR": str(settings.AGENTS_DATA_DIR),
        "AGENTS_ORG_DATABASE": "postgres",
        "DATABASE_URL": PG_SERVER,
        "PYTHONPATH": str(ROOT),
    }
    _run_appenders(postgres_org.slug, [one.id, two.id], processes=3, per_thread=6, env=env)
    _assert_dense(postgres_org.slug, [one.id, two.id], 3 * 4 * 6)


# --- the Python contract ------------------------------------------------------------------


def test_session_update_leaves_omitted_fields_unchanged(org_a):
    with org_a.context():
        session = services.session_create(agent="a", actor="t", title="keep", project="shop", terminal="https://t.example.com")
        updated = services.session_update(session_id=session.id, status="paused")
        assert (updated.title, updated.project, updated.terminal, updated.status) == ("keep", "shop", "https://t.example.com", "paused")
        services.session_update(session_id=session.id, title="", terminal="")
        stored = Session.objects.get(pk=session.id)
    assert (stored.title, stored.terminal, stored.project) == ("", "", "shop")


def test_payload_none_is_a_turn_without_payload_and_unjsonable_values_are_refused(org_a):
    with org_a.context():
        session = services.session_create(agent="a", actor="t")
        event = services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
        assert Event.objects.get(pk=event.id).payload == ""
        with pytest.raises(InvalidRequest, match="payload must be valid JSON"):
            services.session_append_event(session_id=session.id, kind="log", payload={1, 2}, actor="t")
        with pytest.raises(InvalidRequest, match="payload must be valid JSON"):
            services.session_append_event(session_id=session.id, kind="log", payload=float("nan"), actor="t")
        assert Event.objects.count() == 1


def test_a_payload_nested_deeper_than_json_can_write_is_refused(org_a):
    deep: list = []
    for _ in range(5000):
        deep = [deep]
    with org_a.context():
        session = services.session_create(agent="deep", actor="t")
        with pytest.raises(InvalidRequest, match="payload must be valid JSON"):
            services.session_append_event(session_id=session.id, kind="log", payload=deep, actor="t")
        assert Event.objects.count() == 0


def test_writes_publish_frames_only_after_they_commit(org_a, settings):
    settings.AGENTS_SESSION_BUS = "local"

    async def scenario():
        subscription = await get_bus().subscribe(org_a.slug)

        def write():
            with org_a.context():
                session = services.session_create(agent="a", actor="t")
                alias = stores.open_store(org_a.slug)
                with pytest.raises(RuntimeError), transaction.atomic(using=alias):
                    services.session_append_event(session_id=session.id, kind="log", payload={"rolled": "back"}, actor="t")
                    raise RuntimeError("abort")
                services.session_append_event(session_id=session.id, kind="log", payload={"kept": True}, actor="t")
                return session

        session = await asyncio.to_thread(write)
        frames = []
        while (frame := await subscription.get(0.5)) is not None:
            frames.append(frame)
        subscription.close()
        return session, frames

    session, frames = asyncio.run(scenario())
    assert [f["kind"] for f in frames] == ["session", "event"]
    assert frames[0]["data"]["session"]["id"] == session.id and frames[0]["org"] == org_a.slug
    assert frames[1]["data"]["event"]["payload"] == {"kept": True} and frames[1]["position"] == 1
    with org_a.context():
        assert list(Event.objects.values_list("seq", "position")) == [(1, 1)]


def test_a_postgresql_append_is_one_autocommit_statement_then_the_sequencer(postgres_org):
    # No org-wide row is locked by the append (that lock, held to each commit, made a second
    # daphne process wait: BENCHMARKS.md): the append is one autocommit statement on the
    # session row and the event, then the org's sequencer positions it in one round trip.
    from django.test.utils import CaptureQueriesContext

    from sessions.errors import SessionNotFound

    with postgres_org.context() as alias:
        session = services.session_create(agent="racer", actor="t")
        # A clock row removed by hand: the sequencer puts it back; no seq or position is skipped.
        EventClock.objects.all().delete()
        first = services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
        assert (first.seq, first.position) == (1, 1)
        with CaptureQueriesContext(connections[alias]) as queries:
            second = services.session_append_event(session_id=session.id, kind="log", payload={"n": 2}, actor="t")
        statements = [q["sql"].lstrip() for q in queries.captured_queries]
        assert len(statements) == 2 and statements[0].startswith("WITH s AS") and "advisory_xact_lock" in statements[1], statements
        assert "agent_sessions_eventclock" not in statements[0]
        assert (second.seq, second.position) == (2, 2) == (Session.objects.get(pk=session.id).last_seq, EventClock.objects.get(pk=1).last)
        assert Event.objects.get(pk=second.id).payload == second.payload == '{"n":2}'
        # A missing session changes nothing.
        before = EventClock.objects.get(pk=1).last
        with pytest.raises(SessionNotFound):
            services.append_checked(session_id="sess_missing", kind="log", payload_text="", actor="t")
        assert EventClock.objects.get(pk=1).last == before
        # Inside a caller's transaction the append belongs to it (rolled back with it).
        with pytest.raises(RuntimeError), stores.org_atomic():
            services.session_append_event(session_id=session.id, kind="log", payload=None, actor="t")
            raise RuntimeError("roll back")
        assert Session.objects.get(pk=session.id).last_seq == 2 and Event.objects.count() == 2
        assert EventClock.objects.get(pk=1).last == 2
