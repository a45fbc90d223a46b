"""The suite-end scan (issue 49 item 4): every store a test pass created, read the way its engine keeps it,
must hold no credential the scanner finds.

`scan_pass_stores()` reads, for this process's pass:

* every SQLite file under the pass's data directory (the org stores `orgs/<slug>/agents.db` and anything
  else a test left there) with its WAL, byte for byte: what a deleted or rolled-back row left in a free
  page or an old WAL frame counts too. The bytes are cut at control bytes into runs of text, and a run
  seen before in the pass (every org file starts as a copy of one template) is not read again;
* in the PostgreSQL pass, every org database of this process (`AGENTS_ORG_DATABASE_PREFIX`), every row as
  text (the server's files are not ours to read).

A store a test planted raw credentials in on purpose (to test a scanner that must find them) is marked
with `planted(org)` and left out by its slug. Findings carry the store, the rule and the masked
preview, never the value. `AGENTS_TEST_STORE_SCAN=0` turns the scan off (a local run that needs it off).
"""

from __future__ import annotations

import contextlib
import os
import re
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

    _PLANTED.add(org.slug)
    with suspended():
        yield


def planted_slugs() -> set[str]:
    """Return the slugs of the stores marked with `planted` in this process."""
    return set(_PLANTED)


def _slug_of(path: Path, data_dir: Path) -> str:
    parts = path.relative_to(data_dir).parts
    return parts[1] if len(parts) > 2 and parts[0] == "orgs" else str(path.relative_to(data_dir))


def _page_text(data: bytes) -> str:
    return _CONTROL.sub(b"\n", data).decode("utf-8", errors="ignore")


def scan_sqlite_files(data_dir: Path, *, skip: set[str]) -> tuple[list[dict], int]:
    """Return `(findings, bytes read)` of every SQLite file and WAL under `data_dir` not in `skip` (by slug).

    The bytes are cut at control bytes into runs of text; a run of 12+ characters is scanned once in the
    whole pass (the template's rows, repeated in every org file and WAL frame, are read once)."""
    from sessions.scanner import scan_text

    seen: set[str] = set()
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


def scan_pass_stores() -> tuple[list[dict], dict]:
    """Return `(findings, figures)` for every store this process's pass created (see module doc)."""
    from django.conf import settings

    began = time.monotonic()
    skip = planted_slugs()
    findings, read = scan_sqlite_files(Path(settings.AGENTS_DATA_DIR), skip=skip)
    if settings.TEST_STORES == "postgres":
        findings += scan_postgres_databases(skip=skip)
    return findings, {"seconds": round(time.monotonic() - began, 2), "bytes": read, "skipped": sorted(skip)}


def report(findings: list[dict], figures: dict) -> str:
    """Return the failure text: one line per finding (store, file, offset, rule, masked preview)."""
    lines = [f"{len(findings)} credential(s) stored raw in the stores this pass created "
             f"(scanned {figures['bytes']} bytes in {figures['seconds']} s; planted stores left out: {len(figures['skipped'])}):"]
    lines += [f"  {f['store']}\t{f['file']}@{f['offset']}\t{f['rule']}\t{f['preview']}" for f in findings[:50]]
    lines.append("A test that plants a raw credential on purpose marks its store: `with tests.support.store_scan.planted(org): …`.")
    return "\n".join(lines)
