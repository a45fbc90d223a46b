"""PostgreSQL org mode: one org's database dumped and restored on its own.

Litestream is for SQLite; on PostgreSQL the operator runs the server's own continuous backup
(WAL archiving plus a periodic `pg_basebackup`: point-in-time recovery of the whole server,
docs/guides/backups.md). What that cannot do is bring back *one* org without rolling back
the others, which is what this module scripts:

* `backup(slug)` — `pg_dump --format=custom` of the org's database (one consistent snapshot,
  taken while it is served) to `{AGENTS_BACKUP_URL}/pg/{slug}/{UTC time}.dump` (a local or
  mounted directory; ship it off-host like any file). `manage.py backup_org_pg SLUG`.
* `restore(slug, moment)` — the newest dump taken at or before the moment, restored in ONE
  transaction (`DROP SCHEMA public CASCADE`, the dump's SQL from `pg_restore -f -`, through
  `psql --single-transaction`): a failure leaves the database as it was. Meanwhile the org
  answers 503 `store_unavailable` (`restoring`) in every process (`fence`); then the database
  gets this code's migrations and its event clock moves past every position handed out before.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import time
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from agents_site.vocabulary import BackupState, RestoreStatus
from tenancy import registry, stores
from tenancy.backups import fence, litestream
from tenancy.backups.base import OrgBackupStatus, RestoreError, event_clock, floor_above, previous_floor
from tenancy.backends import get_backend
from tenancy.backends.postgres import server_connection
from tenancy.backends.base import migrate_if_behind

DUMP_SUFFIX = ".dump"
_STAMP = "%Y%m%dT%H%M%S%fZ"


def dump_dir(slug: str) -> Path:
    """Return `{AGENTS_BACKUP_URL}/pg/{slug}`; AGENTS_BACKUP_URL must be a local directory here."""
    root = litestream.local_path(litestream.base_url())
    if root is None:
        raise RestoreError("in PostgreSQL mode AGENTS_BACKUP_URL must be a directory (dumps are files; ship them off-host yourself)")
    return root / "pg" / slug


def _server(slug: str) -> tuple[dict, str]:
    backend = get_backend()
    return backend.server_for(slug), backend.settings_for(slug)["NAME"]


def _env_and_args(server: dict) -> tuple[dict, list[str]]:
    env = dict(os.environ)
    if server.get("PASSWORD"):
        env["PGPASSWORD"] = str(server["PASSWORD"])
    args = ["-h", str(server.get("HOST") or "127.0.0.1"), "-p", str(server.get("PORT") or 5432)]
    if server.get("USER"):
        args += ["-U", str(server["USER"])]
    return env, args


def dumps(slug: str) -> list[tuple[dt.datetime, Path]]:
    """Return org `slug`'s dumps as `(moment of its snapshot, path)`, oldest first."""
    directory = dump_dir(slug)
    found = []
    for path in directory.glob(f"*{DUMP_SUFFIX}") if directory.is_dir() else []:
        try:
            found.append((dt.datetime.strptime(path.stem, _STAMP).replace(tzinfo=dt.UTC), path))
        except ValueError:
            continue
    return sorted(found)


def backup(slug: str) -> Path:
    """Dump org `slug`'s database (`pg_dump --format=custom`); return the file. Raises `RestoreError`."""
    server, name = _server(slug)
    directory = dump_dir(slug)
    directory.mkdir(parents=True, exist_ok=True)
    started = timezone.now()  # pg_dump's snapshot is taken as it starts: the dump holds this moment
    final = directory / (started.strftime(_STAMP) + DUMP_SUFFIX)
    partial = final.with_suffix(".partial")
    env, args = _env_and_args(server)
    done = subprocess.run(["pg_dump", "--format=custom", "--no-owner", "--no-privileges", *args, "-f", str(partial), name],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        partial.unlink(missing_ok=True)
        raise RestoreError(f"pg_dump of org {slug!r} failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    os.replace(partial, final)
    return final


def _active_elsewhere(server: dict, name: str) -> int:
    with server_connection(server) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid() "
                           "AND state NOT IN ('idle') AND backend_type = 'client backend'", (name,)).fetchone()
    return int(row[0])


def restore(slug: str, moment: dt.datetime | None, record, *, wait: float, say):
    """Restore org `slug`'s database from its newest dump at or before `moment`; return `record` done."""
    available = dumps(slug)
    if not available:
        raise RestoreError(f"org {slug!r} has no dump yet (manage.py backup_org_pg {slug})")
    chosen = [d for d in available if moment is None or d[0] <= moment]
    if not chosen:
        raise RestoreError(f"the moment {moment.isoformat()} is before the first snapshot of org {slug!r} "
                             f"(its first dump holds {available[0][0].isoformat()})")
    taken, path = chosen[-1]
    server, name = _server(slug)
    say(f"restoring {slug} from {path.name} (taken {taken.isoformat()}); the org answers 503 meanwhile")
    time.sleep(2 * fence.PG_FLAG_TTL_SECONDS)  # every process has read the flag (the `running` record) by now
    deadline = time.monotonic() + wait
    while _active_elsewhere(server, name):
        if time.monotonic() > deadline:
            raise RestoreError(f"org {slug!r} could not be taken offline: work for it was still in progress after {wait:.0f} s; nothing was changed")
        time.sleep(0.05)
    say(f"org {slug} is offline (503 store_unavailable, condition restoring) in every process; restoring its database")
    alias = stores.open_store(slug)
    clock = event_clock()
    live_head = clock.head(alias) if clock else None
    env, args = _env_and_args(server)
    script = subprocess.run(["pg_restore", "--no-owner", "--no-privileges", "-f", "-", str(path)], env=env, capture_output=True)
    if script.returncode != 0:
        raise RestoreError(f"pg_restore could not read {path}: {script.stderr.decode(errors='replace').strip()}")
    sql = b"DROP SCHEMA public CASCADE;\nCREATE SCHEMA public;\n" + script.stdout
    applied = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction", *args, "-d", name],
                             input=sql, env=env, capture_output=True)
    if applied.returncode != 0:
        raise RestoreError(f"restoring org {slug!r} from {path.name} failed, its database is unchanged: "
                             f"{applied.stderr.decode(errors='replace').strip()}")
    registry.evict(alias)  # this process reconnects to the restored tables
    alias = stores.open_store(slug)
    migrate_if_behind(alias)
    restored_head = clock.head(alias) if clock else 0
    floor = floor_above(restored_head, live_head, previous_floor(slug))
    if clock is not None:
        with transaction.atomic(using=alias):
            clock.void_through(alias, floor)
    record.restored_head, record.position_floor = restored_head, floor
    record.status, record.finished_at = RestoreStatus.DONE, timezone.now()
    record.save(using="default")
    say(f"org {slug} is back as of {taken.isoformat()}: event head {restored_head}, new events from {floor + 1}")
    return record


def status(slug: str):
    """Return org `slug`'s backup status in PostgreSQL mode: its newest dump."""
    try:
        available = dumps(slug)
    except Exception as exc:  # noqa: BLE001 - AGENTS_BACKUP_URL unset or not a directory
        return OrgBackupStatus(slug, BackupState.OFF, detail=str(exc))
    if fence.restoring(slug):
        return OrgBackupStatus(slug, BackupState.RESTORING, detail="restore_org is restoring its database")
    if not available:
        return OrgBackupStatus(slug, BackupState.NO_BACKUP, detail=f"no dump yet: manage.py backup_org_pg {slug}")
    newest = available[-1][0]
    return OrgBackupStatus(slug, BackupState.DUMPED, lag_seconds=(timezone.now() - newest).total_seconds(), last_snapshot=newest,
                           newest_change=newest, replica_url=str(dump_dir(slug)),
                           detail="lag = age of the newest dump; between dumps, the server's WAL archive is the backup")
