"""Backups (issue 35): Litestream replication of every org file, restore of one org to a moment.

The drill runs the real parts: `manage.py replicate` (Litestream as its child, a local
directory as the replica), a live daphne serving both orgs from their files, and
`restore_org` in the test process. It never sleeps: each wait is on a condition (the daemon's
`sync -wait`, its control socket, an HTTP answer).
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from django.utils import timezone

from agents.models import Agent
from runs.models import Run
from agents_site.vocabulary import ReplicaGenerationEnd, RestoreStatus
from chat.models import Conversation
from sessions.models import Event, Session
from tenancy import stores
from tenancy.backups import fence, litestream
from tenancy.backups.restore import POSITION_EPOCH, RestoreError, floor_above, parse_moment, restore_org
from tenancy.models import OrgRestore, ReplicaGeneration
from tests.sessions.sse import open_stream
from tests.support.live import ROOT, LiveServer, server_env
from tests.support.files import file_bytes
from tests.support.logs import problems

SESSIONS = "/v1/agents/sessions"


def _wait(condition, what: str, timeout: float = 120.0):
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


class Replicator:
    """`manage.py replicate` as a child process of the test."""

    def __init__(self, env: dict) -> None:
        self.log = Path(env["AGENTS_DATA_DIR"]) / f"replicate-{os.getpid()}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([sys.executable, "manage.py", "replicate"], cwd=ROOT, env=env,
                                         stdout=out, stderr=subprocess.STDOUT)
        self.control = litestream.Control()

    def registered(self, path: Path) -> bool:
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        return self.control.alive() and str(path) in self.control.databases()

    def ship(self, *paths: Path) -> None:
        """Wait until the replica holds everything committed to `paths` so far."""
        for path in paths:
            _wait(lambda p=path: self.registered(p), f"replication of {path}")
            self.control.sync(str(path))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def backup_env(settings, tmp_path, transactional_db):
    """AGENTS_BACKUP_URL = a fresh directory, here and in every child process."""
    settings.AGENTS_BACKUP_URL = str(tmp_path / "replica")
    env = server_env({"AGENTS_BACKUP_URL": str(tmp_path / "replica"), "AGENTS_BACKUP_POLL_SECONDS": "0.2",
                      "AGENTS_SSE_PING_SECONDS": "0.5", "AGENTS_SSE_CATCHUP_SECONDS": "0.3"})
    return env


@pytest.fixture
def replicator(backup_env):
    replicator = Replicator(backup_env)
    yield replicator
    replicator.stop()


def _write(org, label: str, *, upstream) -> dict:
    """Write one of each through the API: an agent and its run, a session with events, a conversation."""
    client = org.client
    agent = client.post("/v1/agents", {"name": f"agent-{label}"}, content_type="application/json")
    assert agent.status_code == 201, agent.content
    upstream.script(upstream.reply_class(content=f"reply {label}"))
    run = client.post(f"/v1/agents/agent-{label}/run", {"input": label}, content_type="application/json")
    assert run.status_code == 200, run.content
    session = client.post(SESSIONS, {"agent": "coder", "title": label}, content_type="application/json").json()
    events = [client.post(f"{SESSIONS}/{session['id']}/events", {"kind": "message", "payload": {"text": f"{label} {i}"}},
                          content_type="application/json").json() for i in range(3)]
    conversation = client.post("/v1/agents/chat/conversations", {"title": label, "messages": [{"role": "user", "content": label}]},
                               content_type="application/json")
    assert conversation.status_code == 201, conversation.content
    with org.context():
        positions = sorted(Event.objects.filter(id__in=[e["id"] for e in events]).values_list("position", flat=True))
    return {"agent": agent.json()["id"], "run": run.json()["id"], "session": session["id"],
            "positions": positions, "conversation": conversation.json()["conversationId"]}


def _rows(org) -> dict[str, set]:
    with org.context():
        return {"agent": set(Agent.objects.values_list("id", flat=True)), "run": set(Run.objects.values_list("id", flat=True)),
                "session": set(Session.objects.values_list("id", flat=True)),
                "positions": set(Event.objects.values_list("position", flat=True)),
                "conversation": set(Conversation.objects.values_list("id", flat=True))}


def _holds(rows: dict[str, set], written: dict) -> bool:
    return all((written[k] in rows[k]) if k != "positions" else set(written[k]) <= rows[k] for k in written)


def _holds_none(rows: dict[str, set], written: dict) -> bool:
    return all((written[k] not in rows[k]) if k != "positions" else not (set(written[k]) & rows[k]) for k in written)


@pytest.fixture
def scripted_upstream(upstream):
    from tests.support.upstream import Reply

    upstream.reply_class = Reply
    return upstream


def test_the_drill_delete_then_corrupt_one_org_and_restore_it_to_a_moment(
        make_org, backup_env, replicator, scripted_upstream, settings):
    from billing.services import credit_add

    settings.AGENTS_RETRY_BASE_SECONDS = 0.001
    org_a, org_b = make_org("drill-a"), make_org("drill-b")
    for org in (org_a, org_b):
        credit_add(org=org.org, cents=10_000, actor="test")
    server = LiveServer(backup_env).start()
    path_a, path_b = stores.store_path(org_a.slug), stores.store_path(org_b.slug)
    try:
        # Two orgs picked up without a restart; rows before the moment, shipped; the moment.
        before_a, before_b = _write(org_a, "before", upstream=scripted_upstream), _write(org_b, "before", upstream=scripted_upstream)
        replicator.ship(path_a, path_b)
        from tenancy.backups.status import org_status

        shipped = org_status(org_a.slug)  # what backup_status and the Backups pages say of a live replica
        assert (shipped.state, shipped.lag_seconds) == ("replicating", 0.0) and shipped.last_snapshot is not None
        moment = timezone.now()
        cursor_before = before_a["positions"][1]  # a client that saw only part of what was written before
        after_a, after_b = _write(org_a, "after", upstream=scripted_upstream), _write(org_b, "after", upstream=scripted_upstream)
        cursor_after = after_a["positions"][-1]
        replicator.ship(path_a, path_b)
        generation = ReplicaGeneration.objects.get(slug=org_a.slug, ended_at__isnull=True)

        # Bad input: a clear error naming the cause, the live file untouched.
        untouched = file_bytes(path_a)
        for slug, at, cause in ((f"{org_a.slug}-nope", None, "unknown org"),
                                (org_a.slug, timezone.now() + dt.timedelta(hours=1), "in the future"),
                                (org_a.slug, generation.started_at - dt.timedelta(hours=1), "before the first snapshot")):
            with pytest.raises(RestoreError, match=cause):
                restore_org(slug, at)
        # (an unreachable replica: test_an_unreachable_replica_is_named_and_the_live_file_untouched)
        assert file_bytes(path_a) == untouched and not fence.flag_path(org_a.slug).exists()
        assert OrgRestore.objects.filter(slug=org_a.slug, status=RestoreStatus.FAILED).count() == 1  # the generations were asked; the other two never got that far

        # The disaster: org A's file deleted. B is served throughout; A answers 503 while restored.
        served_b, stop = [], threading.Event()

        def serve_b():
            with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {org_b.key}"}, timeout=30) as client:
                while not stop.is_set():
                    served_b.append(client.get(f"{SESSIONS}/{before_b['session']}").status_code)

        offline = []

        def say(line: str) -> None:
            if "is offline" in line:
                offline.append(httpx.get(f"{server.url}{SESSIONS}", headers={"Authorization": f"Bearer {org_a.key}"}, timeout=30))

        for suffix in ("", "-wal", "-shm"):
            Path(str(path_a) + suffix).unlink(missing_ok=True)
        watcher = threading.Thread(target=serve_b)
        watcher.start()
        try:
            _wait(lambda: len(served_b) >= 1, "org B served")
            record = restore_org(org_a.slug, moment, say=say)
            served_before_end = len(served_b)
            _wait(lambda: len(served_b) > served_before_end, "org B served after the restore")
        finally:
            stop.set()
            watcher.join()
        assert served_b and set(served_b) == {200}
        assert [r.status_code for r in offline] == [503]
        assert offline[0].json() == {"status": 503, "code": "store_unavailable", "condition": "restoring",
                                     "error": "the org's store is being restored from its backup; nothing was written"}
        assert offline[0].headers["Retry-After"] == "5"

        # Every row written before the moment is back, none after; B untouched; daphne serves A's restored file.
        rows_a, rows_b = _rows(org_a), _rows(org_b)
        assert _holds(rows_a, before_a) and _holds_none(rows_a, after_a)
        assert _holds(rows_b, before_b) and _holds(rows_b, after_b)
        assert record.restored_head == max(before_a["positions"]) and record.position_floor == POSITION_EPOCH
        listed = httpx.get(f"{server.url}{SESSIONS}", headers={"Authorization": f"Bearer {org_a.key}"}, timeout=30)
        # daphne, which had A's old file open in its pool, serves exactly the restored file (runs have sessions too)
        assert listed.status_code == 200 and {s["id"] for s in listed.json()["sessions"]} == rows_a["session"]
        assert before_a["session"] in rows_a["session"] and after_a["session"] not in rows_a["session"]
        assert ReplicaGeneration.objects.get(pk=generation.pk).end_reason == ReplicaGenerationEnd.RESTORED

        # Resume cursors: one from before the moment resumes; one from after gets `reset`; new events follow the floor.
        resumed = open_stream(server.url, org_a.key, headers={"Last-Event-ID": str(cursor_before)})
        try:
            assert resumed.next_frame().comment == "stream open"
            frame = resumed.next_frame()
        finally:
            resumed.close()
        assert (frame.event, frame.id) == ("event", before_a["positions"][2])  # replayed from the restored store
        reset = open_stream(server.url, org_a.key, headers={"Last-Event-ID": str(cursor_after)})
        try:
            assert reset.next_frame().comment == "stream open"
            frame = reset.next_frame()
        finally:
            reset.close()
        assert (frame.event, frame.id, frame.data) == ("reset", POSITION_EPOCH, {"head": POSITION_EPOCH})
        new = httpx.post(f"{server.url}{SESSIONS}/{before_a['session']}/events", json={"kind": "log"},
                         headers={"Authorization": f"Bearer {org_a.key}"}, timeout=30)
        assert new.status_code == 201
        with org_a.context():
            assert Event.objects.get(id=new.json()["id"]).position == POSITION_EPOCH + 1

        # Separately: the restored org's file corrupted; restored to a moment of its new generation.
        later_a = _write(org_a, "later", upstream=scripted_upstream)
        replicator.ship(path_a)
        moment2 = timezone.now()
        lost_a = _write(org_a, "lost", upstream=scripted_upstream)
        with open(path_a, "r+b") as handle:
            handle.write(b"this is not a SQLite file any more" * 64)
        record2 = restore_org(org_a.slug, moment2)
        rows_a = _rows(org_a)
        assert _holds(rows_a, before_a) and _holds(rows_a, later_a) and _holds_none(rows_a, lost_a) and _holds_none(rows_a, after_a)
        assert record2.position_floor == 2 * POSITION_EPOCH and _rows(org_b) == rows_b
        assert httpx.get(f"{server.url}{SESSIONS}/{later_a['session']}", headers={"Authorization": f"Bearer {org_a.key}"},
                         timeout=30).status_code == 200

        # Removing an org stops its replication; its replica is kept (for the retention period).
        b_generation = ReplicaGeneration.objects.get(slug=org_b.slug, ended_at__isnull=True)
        org_b.org.delete()
        _wait(lambda: str(path_b) not in replicator.control.databases(), "org B's replication stopped")
        _wait(lambda: ReplicaGeneration.objects.get(pk=b_generation.pk).end_reason == ReplicaGenerationEnd.REMOVED, "B's line ended")
        assert litestream.ltx_files(b_generation.replica_url)  # still there, still restorable

        # The drill's log: the restore's 503 is one warning line; nothing is a traceback (issue 51).
        server.stop()
        log = server.log_path.read_text()
        assert f"GET {SESSIONS} answered 503 store_unavailable" in log
        assert problems(log) == []
    finally:
        server.stop()


def test_an_unreachable_replica_is_named_and_the_live_file_untouched(org_a, settings, tmp_path):
    """The org's line lives on a replica nothing answers for (port 1: connection refused). No
    replicate runs here: a running one would take the changed URL for a moved AGENTS_BACKUP_URL."""
    settings.AGENTS_BACKUP_URL = "sftp://operator@127.0.0.1:1/nowhere"
    with org_a.context():
        Agent.objects.create(id="agent_kept", name="kept", created_at=timezone.now(), updated_at=timezone.now())
    ReplicaGeneration.objects.create(slug=org_a.slug, name="g1", replica_url=f"{settings.AGENTS_BACKUP_URL}/orgs/{org_a.slug}/g1",
                                     started_at=timezone.now() - dt.timedelta(hours=1))
    path = stores.store_path(org_a.slug)
    untouched = file_bytes(path)
    for moment in (None, timezone.now() - dt.timedelta(minutes=1)):
        with pytest.raises(RestoreError, match=f"the replica of org '{org_a.slug}' cannot be reached at "
                                               f"sftp://operator@127.0.0.1:1/nowhere/orgs/{org_a.slug}/g1: .*connection refused"):
            restore_org(org_a.slug, moment)
    assert file_bytes(path) == untouched and not fence.flag_path(org_a.slug).exists()
    assert list(OrgRestore.objects.filter(slug=org_a.slug).values_list("status", flat=True)) == [RestoreStatus.FAILED] * 2
    with org_a.context():
        assert list(Agent.objects.values_list("name", flat=True)) == ["kept"]


def test_a_restore_waits_for_work_in_flight_and_refuses_new_work(org_a, tmp_path, settings):
    from agents_site.errors import StoreUnavailable

    with org_a.context():
        Agent.objects.count()
        with fence.Fenced(org_a.slug) as fenced:
            fenced.raise_flag()
            with pytest.raises(TimeoutError, match="still in progress"):
                fenced.drain(0.05)  # this very frame acts for the org
    with fence.Fenced(org_a.slug) as fenced:
        fenced.raise_flag()
        fenced.drain(5)
        with pytest.raises(StoreUnavailable):
            with org_a.context():
                pass
        from django.test import Client

        response = Client(HTTP_AUTHORIZATION=f"Bearer {org_a.key}", raise_request_exception=False).get(SESSIONS)
        assert response.status_code == 503 and response.json()["condition"] == "restoring"
        assert response["Retry-After"] == "5"
    assert org_a.client.get(SESSIONS).status_code == 200


def test_refusals_that_need_no_replica(org_a, settings, tmp_path):
    settings.AGENTS_BACKUP_URL = str(tmp_path / "replica")
    with pytest.raises(RestoreError, match="unknown org 'no-such-org'"):
        restore_org("no-such-org")
    with pytest.raises(RestoreError, match="not a valid org slug"):
        restore_org("../etc")
    with pytest.raises(RestoreError, match="no backup yet"):
        restore_org(org_a.slug)
    with pytest.raises(RestoreError, match="not an ISO-8601 moment"):
        parse_moment("yesterday")
    assert parse_moment("2026-05-01T12:30:00") == dt.datetime(2026, 5, 1, 12, 30, tzinfo=dt.UTC)
    # The operator's command: the same cause, as a CommandError (exit status 1), nothing changed.
    from django.core.management import call_command
    from django.core.management.base import CommandError

    untouched = file_bytes(stores.store_path(org_a.slug))
    for args, cause in ((["no-such-org"], "unknown org 'no-such-org'"), ([org_a.slug, "--at", "yesterday"], "not an ISO-8601 moment"),
                        ([org_a.slug, "--at", "2999-01-01T00:00:00Z"], "is in the future"), ([org_a.slug], "no backup yet")):
        with pytest.raises(CommandError, match=cause):
            call_command("restore_org", *args)
    settings.AGENTS_BACKUP_URL = ""
    with pytest.raises(CommandError, match="AGENTS_BACKUP_URL is not set"):
        call_command("restore_org", org_a.slug)
    with pytest.raises(CommandError, match="AGENTS_BACKUP_URL is not set"):
        call_command("replicate")
    assert file_bytes(stores.store_path(org_a.slug)) == untouched and not fence.flag_path(org_a.slug).exists()
    assert floor_above(0) == POSITION_EPOCH and floor_above(5, None, POSITION_EPOCH + 3) == 2 * POSITION_EPOCH


def test_replicas_of_ended_lines_are_deleted_after_the_retention_period(settings, tmp_path, db):
    from tenancy.backups.replication import Supervisor

    settings.AGENTS_BACKUP_URL = str(tmp_path / "replica")
    settings.AGENTS_BACKUP_RETENTION_DAYS = 7
    now = timezone.now()
    lines = {}
    for name, ended_days_ago in (("old", 8), ("recent", 6), ("current", None)):
        url = litestream.join(litestream.base_url(), "orgs", "gone", name)
        (litestream.local_path(url) / "ltx" / "0").mkdir(parents=True)
        ended = None if ended_days_ago is None else now - dt.timedelta(days=ended_days_ago)
        lines[name] = ReplicaGeneration.objects.create(slug="gone", name=name, replica_url=url, started_at=now - dt.timedelta(days=9),
                                                       ended_at=ended, end_reason=ReplicaGenerationEnd.REMOVED if ended else "")
    assert Supervisor().prune() == 1
    kept = {name: litestream.local_path(line.replica_url).exists() for name, line in lines.items()}
    assert kept == {"old": False, "recent": True, "current": True}
    assert ReplicaGeneration.objects.get(pk=lines["old"].pk).pruned_at is not None


def test_replication_moves_the_apps_checkpoint_out_of_litestreams_way(settings, tmp_path, db):
    from tenancy.backends.sqlite import sqlite_settings

    settings.AGENTS_BACKUP_URL = ""
    assert "PRAGMA wal_autocheckpoint=1000;" in sqlite_settings(tmp_path / "x.db")["OPTIONS"]["init_command"]
    settings.AGENTS_BACKUP_URL = str(tmp_path / "replica")
    with stores.org_context("checkpoint-owner") as alias:
        from django.db import connections

        with connections[alias].cursor() as cursor:
            cursor.execute("PRAGMA wal_autocheckpoint")
            assert cursor.fetchone()[0] == 10_000  # Litestream checkpoints at 1,000 pages
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0] == "wal"


def _procfile_command(name: str) -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"the Procfile has no {name} process")


def test_the_procfiles_backup_process_replicates_only_when_the_url_is_set(backup_env):
    """honcho (and any Procfile runner) stops every process when one exits: without the URL the
    backup process must idle, not fail, or `honcho start` would take daphne and the qcluster down."""
    from django.db import connections

    command = _procfile_command("backup")
    without = {k: v for k, v in backup_env.items() if k != "AGENTS_BACKUP_URL"}
    blank = {**backup_env, "AGENTS_BACKUP_URL": "  \t"}  # the settings strip it to "": replicate would exit (review)
    for env in (without, blank):
        idle = subprocess.Popen(["/bin/sh", "-c", command], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            assert idle.stdout.readline() == b"AGENTS_BACKUP_URL is not set: replication is off\n"
            assert idle.poll() is None
        finally:
            idle.terminate()
            idle.wait(timeout=30)

    default_path = str(connections["default"].settings_dict["NAME"])
    log = Path(backup_env["AGENTS_DATA_DIR"]) / f"procfile-backup-{os.getpid()}.log"
    with open(log, "wb") as out:
        on = subprocess.Popen(["/bin/sh", "-c", command], cwd=ROOT, env=backup_env, stdout=out, stderr=subprocess.STDOUT)
    control = litestream.Control()
    try:
        def default_registered() -> bool:
            assert on.poll() is None, log.read_text()[-3000:]
            return control.alive() and default_path in control.databases()

        _wait(default_registered, "the default database replicated by the Procfile's backup process")
        control.sync(default_path)
        assert litestream.ltx_files(litestream.join(litestream.base_url(), "default"))  # shipped to {URL}/default
    finally:
        on.terminate()
        on.wait(timeout=60)


def test_replicate_with_an_unreachable_replica_names_the_cause_and_keeps_trying(backup_env):
    """An unreachable replica (here: nothing listens on port 1) makes Litestream exit at start;
    `replicate` says why and tries again instead of exiting (which would stop the Procfile's web
    and worker with it); SIGTERM still ends it."""
    env = {**backup_env, "AGENTS_BACKUP_URL": "sftp://operator@127.0.0.1:1/nowhere"}
    replicator = Replicator(env)
    try:
        def said_twice() -> bool:
            assert replicator.proc.poll() is None, replicator.log.read_text()[-3000:]
            return replicator.log.read_text().count("trying again") >= 2

        _wait(said_twice, "two failed starts reported")
        first = next(line for line in replicator.log.read_text().splitlines() if "trying again" in line)
        assert first.startswith("replication is not running: litestream exited 1: ")
        assert "dial tcp 127.0.0.1:1: connect: connection refused" in first and "litestream.log" in first
    finally:
        replicator.stop()
    assert replicator.proc.returncode == 0


def test_a_changed_backup_url_starts_a_new_line_at_the_new_replica(org_a, settings, tmp_path):
    """The org's line lived under the old AGENTS_BACKUP_URL: replicating on there would leave the
    new replica without the org (and backup_status reading the old one)."""
    from tenancy.backups.replication import Supervisor

    settings.AGENTS_BACKUP_URL = str(tmp_path / "old")
    old = Supervisor().desired()[str(stores.store_path(org_a.slug))]
    assert old.startswith(f"file://{tmp_path / 'old'}/orgs/{org_a.slug}/g")
    assert Supervisor().desired()[str(stores.store_path(org_a.slug))] == old  # unchanged setting: the same line
    settings.AGENTS_BACKUP_URL = str(tmp_path / "new")
    said = []
    new = Supervisor(say=said.append).desired()[str(stores.store_path(org_a.slug))]
    assert new.startswith(f"file://{tmp_path / 'new'}/orgs/{org_a.slug}/g")
    ended = ReplicaGeneration.objects.get(slug=org_a.slug, replica_url=old)
    assert ended.end_reason == ReplicaGenerationEnd.MOVED and ended.ended_at is not None
    assert ReplicaGeneration.objects.get(slug=org_a.slug, ended_at__isnull=True).replica_url == new
    assert said == [f"AGENTS_BACKUP_URL changed: org {org_a.slug} starts a new replica at {new}"]


def test_a_rotated_replica_password_keeps_the_line_and_its_history(org_a, settings):
    """Only the credentials of AGENTS_BACKUP_URL changed: the same replica, so the org's line goes
    on (its earlier moments stay restorable) with the new URL stored for restores — not a new
    line and a full snapshot (found by review: the URLs were compared with their passwords)."""
    from tenancy.backups.replication import Supervisor

    settings.AGENTS_BACKUP_URL = "sftp://backup:old-pw@127.0.0.1:2222/agents"
    path = str(stores.store_path(org_a.slug))
    old = Supervisor().desired()[path]
    settings.AGENTS_BACKUP_URL = "sftp://backup:new-pw@127.0.0.1:2222/agents"
    said = []
    new = Supervisor(say=said.append).desired()[path]
    assert new == old.replace("old-pw", "new-pw") and said == []
    [line] = ReplicaGeneration.objects.filter(slug=org_a.slug)
    assert line.ended_at is None and line.replica_url == new
    settings.AGENTS_BACKUP_URL = "sftp://backup:new-pw@127.0.0.1:2222/elsewhere"
    moved = Supervisor(say=said.append).desired()[path]
    assert "/elsewhere/" in moved and "new-pw" not in said[0] and "backup:***@" in said[0]


def test_a_moment_after_the_line_began_but_before_its_first_snapshot_is_refused(org_a, settings, tmp_path):
    """The generation row is older than anything in its replica (replicate had not shipped yet):
    the replica's own first file bounds the moment, and the refusal says which moment that is."""
    from tests.tenancy.test_backup_status import _replicate_once

    settings.AGENTS_BACKUP_URL = str(tmp_path / "replica")
    url = litestream.join(litestream.base_url(), "orgs", org_a.slug, "g1")
    ReplicaGeneration.objects.create(slug=org_a.slug, name="g1", replica_url=url, started_at=timezone.now() - dt.timedelta(hours=1))
    _replicate_once(org_a.slug, url, tmp_path)
    earliest = min(f.created_at for f in litestream.ltx_files(url))
    untouched = file_bytes(stores.store_path(org_a.slug))
    import re

    with pytest.raises(RestoreError, match=re.escape(f"before the first snapshot of org '{org_a.slug}' "
                                                     f"(the earliest moment its replica can restore is {earliest.isoformat()})")):
        restore_org(org_a.slug, earliest - dt.timedelta(minutes=30))
    assert file_bytes(stores.store_path(org_a.slug)) == untouched
