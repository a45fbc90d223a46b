"""The suite-end scan (issue 49 item 4): every store a test pass created, read the way its engine keeps it,
must hold no credential the scanner finds.

`scan_pass_stores()` reads, for this process's pass:

* every SQLite file under the pass's data directory (the org stores `orgs/<slug>/agents.db` and anything
  else a test left there) with its WAL, byte for byte: what a deleted or rolled-back row left in a free
  page or an old WAL frame counts too. The bytes are cut at control bytes into runs of text, and a run
  seen before in the pass (every org file starts as a copy of one template) is not read again;
* in the PostgreSQL pass, every org database of this process (`AGENTS_ORG_DATABASE_PREFIX`), every row as
  text (the server's files are not ours to read);
* every Litestream replica the pass made in a local directory (`file://`; the tests' `AGENTS_BACKUP_URL` is a
  directory under pytest's temporary root or the data directory), and the LTX files Litestream keeps beside
  each database it replicates (`.agents.db-litestream/`): every LTX file of every level, each page
  frame decompressed (LZ4 block, `ltx_pages`) and the pages read as the SQLite files are. That is every
  page version the replica keeps — more than a restore shows (a restore writes one moment's pages only;
  a value deleted since is still in an older LTX file, and restorable to that moment).

A store a test planted raw credentials in on purpose (to test a scanner that must find them) is marked
with `planted(org)` and left out by its slug. Findings carry the store, the rule and the masked
preview, never the value. `AGENTS_TEST_STORE_SCAN=0` turns the scan off (a local run that needs it off).
"""

from __future__ import annotations

import contextlib
import os
import re
import struct
import time
from pathlib import Path

MIN_RUN = 12  # characters: a shorter run of text holds no credential a rule knows
BATCH = 2000  # runs of text per scan
_CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]+")
_PLANTED: set[str] = set()


@contextlib.contextmanager
def planted(org):
    """Write past the storage guard inside the block, and leave `org`'s store out of the suite-end scan."""
    from sessions.storage_guard import suspended

    mark_planted(org.slug)
    with suspended():
        yield


def mark_planted(slug: str) -> None:
    """Leave the store `slug` (an org file, database or replica) out of the suite-end scan."""
    _PLANTED.add(slug)


def planted_slugs() -> set[str]:
    """Return the slugs of the stores marked with `planted` in this process."""
    return set(_PLANTED)


def _slug_of(path: Path, data_dir: Path) -> str:
    parts = path.relative_to(data_dir).parts
    return parts[1] if len(parts) > 2 and parts[0] == "orgs" else str(path.relative_to(data_dir))


def _page_text(data: bytes) -> str:
    return _CONTROL.sub(b"\n", data).decode("utf-8", errors="ignore")


def scan_sqlite_files(data_dir: Path, *, skip: set[str], seen: set[str] | None = None) -> tuple[list[dict], int]:
    """Return `(findings, bytes read)` of every SQLite file and WAL under `data_dir` not in `skip` (by slug).

    The bytes are cut at control bytes into runs of text; a run of 12+ characters is scanned once in the
    whole pass (the template's rows, repeated in every org file and WAL frame, are read once); `seen`
    collects the runs read (and skips those already in it)."""
    from sessions.scanner import scan_text

    seen = set() if seen is None else seen
    findings: list[dict] = []
    read = 0
    paths = sorted(p for p in data_dir.rglob("*") if p.is_file() and (p.name.endswith((".db", ".db-wal", ".sqlite3", ".sqlite3-wal"))))
    for path in paths:
        store = _slug_of(path, data_dir)
        if store in skip:
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        read += len(data)
        fresh = [run for run in _page_text(data).split("\n") if len(run) >= MIN_RUN and run not in seen]
        seen.update(fresh)
        for at in range(0, len(fresh), BATCH):
            for finding in scan_text("\n".join(fresh[at : at + BATCH])):
                findings.append({"store": store, "file": path.name, "offset": 0, "rule": finding.rule, "preview": finding.preview})
    return findings, read


LTX_MAGIC = b"LTX1"
LTX_HEADER = 100  # bytes
_PAGE_FLAG_SIZE = 0x1  # a page frame's data is an LZ4 block of the size that follows its header


def lz4_block(data: bytes, size: int) -> bytes:
    """Return the LZ4 *block* `data` decompressed (at most `size` bytes: one database page).

    Raises `ValueError` on a malformed block (an offset before the start)."""
    out = bytearray()
    at, end = 0, len(data)
    while at < end:
        token = data[at]
        at += 1
        literal = token >> 4
        if literal == 15:
            while True:
                extra = data[at]
                at += 1
                literal += extra
                if extra != 255:
                    break
        out += data[at : at + literal]
        at += literal
        if at >= end:
            break  # the last sequence has literals only
        offset = data[at] | (data[at + 1] << 8)
        at += 2
        length = token & 15
        if length == 15:
            while True:
                extra = data[at]
                at += 1
                length += extra
                if extra != 255:
                    break
        length += 4
        start = len(out) - offset
        if offset == 0 or start < 0:
            raise ValueError("LZ4 block: a match before the start")
        if offset >= length:
            out += out[start : start + length]
        else:  # an overlapping match repeats the last `offset` bytes
            out += (bytes(out[start:]) * (length // offset + 1))[:length]
    if len(out) > size:
        raise ValueError(f"LZ4 block: {len(out)} bytes, more than a page of {size}")
    return bytes(out)


def ltx_pages(path: Path) -> list[tuple[int, bytes]]:
    """Return `(page number, page bytes)` of every page frame of one Litestream LTX file (format `LTX1`,
    Litestream 0.5: a 100-byte header, frames of `pgno u32, flags u16[, size u32], data` up to a frame
    numbered 0, then the page index and trailer). Raises `ValueError` on a file that is not LTX."""
    data = path.read_bytes()
    if data[:4] != LTX_MAGIC:
        raise ValueError(f"{path} is not an LTX file")
    page_size = struct.unpack_from(">I", data, 8)[0]
    pages, at = [], LTX_HEADER
    while at + 6 <= len(data):
        pgno, flags = struct.unpack_from(">IH", data, at)
        at += 6
        if pgno == 0:
            break
        if flags & _PAGE_FLAG_SIZE:
            size = struct.unpack_from(">I", data, at)[0]
            at += 4
            pages.append((pgno, lz4_block(data[at : at + size], page_size)))
            at += size
        else:
            pages.append((pgno, data[at : at + page_size]))
            at += page_size
    return pages


def _replica_store(path: Path) -> str:
    """Return the store an LTX file replicates: the org slug of a replica `…/orgs/<slug>/<generation>/ltx/<level>/…`
    or of Litestream's local copy beside an org file `…/orgs/<slug>/.agents.db-litestream/ltx/<level>/…`; else
    the database of a local copy (`.default.db-litestream` → `default.db`) or the replica's directory
    (`…/default/ltx/0/…` → `default`)."""
    parts = path.parts
    if "orgs" in parts[:-1]:
        at = len(parts) - 1 - parts[::-1].index("orgs")
        if at + 2 < len(parts):
            return parts[at + 1]
    for part in parts[:-1]:
        if part.startswith(".") and part.endswith("-litestream"):
            return part[1 : -len("-litestream")]
    return path.parent.parent.parent.name if path.parent.parent.name == "ltx" else str(path.parent)


def scan_replicas(roots, *, skip: set[str], seen: set[str] | None = None) -> tuple[list[dict], int]:
    """Return `(findings, LTX bytes read)` of every Litestream LTX file under `roots` whose store (org slug)
    is not in `skip`: each file's pages decompressed and joined in frame order, cut into runs of text as the
    SQLite files are; a run in `seen` (the SQLite files' runs) is not read again."""
    from sessions.scanner import scan_text

    seen = set() if seen is None else seen
    findings: list[dict] = []
    read = 0
    paths = sorted({p for root in roots if Path(root).is_dir() for p in Path(root).rglob("*.ltx") if p.is_file()})
    for path in paths:
        store = _replica_store(path)
        if store in skip:
            continue
        try:
            pages = ltx_pages(path)
        except (OSError, ValueError, IndexError, struct.error) as exc:
            findings.append({"store": store, "file": str(path), "offset": 0, "rule": "unreadable-replica", "preview": str(exc)[:200]})
            continue
        read += path.stat().st_size
        fresh = [run for run in _page_text(b"".join(page for _, page in pages)).split("\n") if len(run) >= MIN_RUN and run not in seen]
        seen.update(fresh)
        for at in range(0, len(fresh), BATCH):
            for finding in scan_text("\n".join(fresh[at : at + BATCH])):
                findings.append({"store": store, "file": str(path), "offset": 0, "rule": finding.rule, "preview": finding.preview})
    return findings, read


def scan_postgres_databases(*, skip: set[str]) -> list[dict]:
    """Return the findings in every org database of this process (PostgreSQL pass), every row as text."""
    import psycopg
    from django.conf import settings

    from sessions.scanner import scan_text
    from tenancy import stores

    prefix = settings.AGENTS_ORG_DATABASE_PREFIX
    skipped = {stores.postgres_database_name(slug) for slug in skip}
    findings: list[dict] = []
    server = os.environ["DATABASE_URL"]
    with psycopg.connect(server, autocommit=True) as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (prefix,))]
    base = server.rsplit("/", 1)[0]
    for name in names:
        if name in skipped:
            continue
        with psycopg.connect(f"{base}/{name}", autocommit=True) as conn:
            tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
            for table in tables:
                rows = conn.execute(f'SELECT t::text FROM "{table}" t').fetchall()  # noqa: S608 (names from the catalog)
                text = "\n".join(r[0] for r in rows)
                for finding in scan_text(text) if text else []:
                    findings.append({"store": name, "file": table, "offset": 0, "rule": finding.rule, "preview": finding.preview})
    return findings


def scan_pass_stores(replica_roots=()) -> tuple[list[dict], dict]:
    """Return `(findings, figures)` for every store this process's pass created (see module doc).

    `replica_roots`: directories where the pass's Litestream replicas may be (the conftest passes pytest's
    temporary root of this process); the data directory is always one. `figures["replicaSeconds"]` is the
    part the replicas took."""
    from django.conf import settings

    began = time.monotonic()
    skip = planted_slugs()
    seen: set[str] = set()
    data_dir = Path(settings.AGENTS_DATA_DIR)
    findings, read = scan_sqlite_files(data_dir, skip=skip, seen=seen)
    replicas_began = time.monotonic()
    replica_findings, replica_read = scan_replicas([data_dir, *replica_roots], skip=skip, seen=seen)
    replica_seconds = time.monotonic() - replicas_began
    findings += replica_findings
    if settings.TEST_STORES == "postgres":
        findings += scan_postgres_databases(skip=skip)
    return findings, {"seconds": round(time.monotonic() - began, 2), "bytes": read + replica_read, "replicaBytes": replica_read,
                      "replicaSeconds": round(replica_seconds, 2), "skipped": sorted(skip)}


def report(findings: list[dict], figures: dict) -> str:
    """Return the failure text: one line per finding (store, file, offset, rule, masked preview)."""
    lines = [f"{len(findings)} credential(s) stored raw in the stores this pass created "
             f"(scanned {figures['bytes']} bytes in {figures['seconds']} s; planted stores left out: {len(figures['skipped'])}):"]
    lines += [f"  {f['store']}\t{f['file']}@{f['offset']}\t{f['rule']}\t{f['preview']}" for f in findings[:50]]
    lines.append("A test that plants a raw credential on purpose marks its store: `with tests.support.store_scan.planted(org): …`.")
    return "\n".join(lines)
