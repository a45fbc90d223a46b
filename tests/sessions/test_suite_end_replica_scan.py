"""The suite-end store scan reads the Litestream replicas a pass made (issue 49 item 4; decision 1494).

A replica is made by a one-shot Litestream sync (`litestream replicate -once`, the pinned binary) of a
SQLite file that held a credential, which is then deleted from the file (row deleted, `VACUUM`, WAL
truncated): only the replica holds it. The scan must find it there — in an LTX page whose LZ4 block
replaced part of the value by a back-reference, so the replica's raw bytes do not hold the value and
only decoding finds it — and must name the store and rule with a masked preview, never the value.
"""

from __future__ import annotations

import sqlite3
import subprocess
import uuid

import pytest

from tenancy.backups import litestream
from tests.support.credentials import credential_corpus
from tests.support.store_scan import mark_planted, ltx_pages, planted_slugs, scan_replicas, scan_sqlite_files

pytestmark = pytest.mark.django_db

VALUE = {name: value for name, _, value in credential_corpus()}["github-classic-pat"]


def _replicated_then_deleted(tmp_path, slug: str, rows: list[str]) -> tuple:
    """Write `rows` into a new SQLite file (WAL), replicate it once to `replica/orgs/<slug>/g1`, then delete
    the rows from the file for good; return `(database path, LTX files)`."""
    db = tmp_path / "src" / "orgs" / slug / "agents.db"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE note (id INTEGER PRIMARY KEY, body TEXT)")
    conn.executemany("INSERT INTO note (body) VALUES (?)", [(row,) for row in rows])
    conn.commit()
    url = litestream.join("file://" + str(tmp_path / "replica"), "orgs", slug, "g1")
    config = tmp_path / "once.yml"
    config.write_text(litestream.render_config([(str(db), url)]).replace(litestream.socket_path(), str(tmp_path / "once.sock")))
    done = subprocess.run([litestream.binary(), "replicate", "-once", "-config", str(config)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    conn.execute("DELETE FROM note")
    conn.commit()
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    ltx = sorted((tmp_path / "replica").rglob("*.ltx"))
    assert ltx, "litestream wrote no LTX file"
    ltx += sorted(db.parent.glob(".agents.db-litestream/ltx/*/*.ltx"))  # Litestream's local copy beside the file
    return db, ltx


@pytest.fixture
def slug():
    """A store name of this test's own, marked planted: the real suite-end scan leaves its replica out."""
    name = f"planted-replica-{uuid.uuid4().hex[:8]}"
    mark_planted(name)
    return name


def test_a_credential_only_a_replica_holds_is_found(tmp_path, slug):
    # The full value first, then its first 24 characters: SQLite fills a page from its end, so the prefix
    # comes first in the page's bytes and LZ4 encodes the value's start as a back-reference to it.
    db, ltx = _replicated_then_deleted(tmp_path, slug, [f"deploy with {VALUE} today", f"a note: {VALUE[:24]}"])

    assert VALUE.encode() not in db.read_bytes()  # the database file no longer holds it
    assert scan_sqlite_files(tmp_path / "src", skip=set())[0] == []
    assert not any(VALUE.encode() in path.read_bytes() for path in ltx)  # nor the replica's raw bytes: only decoded pages do

    findings, read = scan_replicas([tmp_path], skip=set())

    assert read == sum(path.stat().st_size for path in ltx)
    # once: the replica and Litestream's local copy beside the file hold the same pages, each run of text is read once
    assert [(f["store"], f["rule"]) for f in findings] == [(slug, "github-token")]
    assert findings[0]["file"] in map(str, ltx) and VALUE not in str(findings)  # the preview is masked


def test_a_planted_replica_is_left_out_by_its_store(tmp_path, slug):
    _replicated_then_deleted(tmp_path, slug, [f"deploy with {VALUE} today"])

    assert slug in planted_slugs()
    assert scan_replicas([tmp_path], skip=planted_slugs()) == ([], 0)


def test_the_decoded_pages_are_the_database(tmp_path, slug):
    rows = [f"row {n} " + "lorem ipsum " * n for n in range(200)]  # several pages, runs LZ4 compresses
    _, ltx = _replicated_then_deleted(tmp_path, slug, rows)

    pages = dict(ltx_pages(ltx[0]))  # the first sync: every page of the database
    assert sorted(pages) == list(range(1, len(pages) + 1)) and len(pages) > 3
    rebuilt = tmp_path / "rebuilt.db"
    rebuilt.write_bytes(b"".join(pages[n] for n in sorted(pages)))
    conn = sqlite3.connect(rebuilt)
    try:
        assert [r[0] for r in conn.execute("SELECT body FROM note ORDER BY id")] == rows
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


def test_a_file_that_is_not_ltx_is_reported_not_skipped(tmp_path, slug):
    bad = tmp_path / "replica" / "orgs" / slug / "g1" / "ltx" / "0" / "0000000000000001-0000000000000001.ltx"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not an ltx file")

    findings, _ = scan_replicas([tmp_path], skip=set())

    assert [(f["store"], f["rule"]) for f in findings] == [(slug, "unreadable-replica")]
