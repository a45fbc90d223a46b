"""Restore one org's store to a moment while every other org is served (`manage.py restore_org`).

SQLite mode, in this order, the live file untouched until the last step:

1. Check the input: a known org, a moment not in the future, the org's replica generation that
   held the moment (`tenancy.ReplicaGeneration`), reachable, with a snapshot at or before it.
2. Litestream restores that generation as of the moment into a new file beside the live one;
   it is migrated to this code's migrations (a backup may predate a deploy).
3. The fence goes up (`fence`): the org answers 503 `store_unavailable` (`condition:
   restoring`) in every process, and the restore waits until no process acts for it.
4. Litestream stops replicating the old file; the event clock of the new file moves past every
   position the old one may have handed out (`tenancy.backups.base.register_event_clock`): a `Last-Event-ID` from
   before the moment resumes, one from after gets the stream's `reset` frame.
5. The new file replaces the live one (its `-wal`/`-shm` and Litestream's local state removed
   first); the replica generation ends (`restored`) and a new one begins, so the old line stays
   restorable; the fence comes down and the org is served with the data of the moment.

PostgreSQL org mode: `tenancy.backups.postgres.restore` (a `pg_restore` of the newest dump taken
at or before the moment, in one transaction, under the same 503).

Every refusal is a `RestoreError` naming the cause; nothing is changed then.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents_site.vocabulary import ReplicaGenerationEnd, RestoreStatus
from tenancy import registry, stores
from tenancy.backends import get_backend
from tenancy.backends.base import migrate_if_behind
from tenancy.backends.sqlite import sqlite_settings, store_path
from tenancy.backups import fence, litestream, postgres
from tenancy.backups.base import (  # noqa: F401 - RestoreError, POSITION_EPOCH, floor_above are this module's API too
    POSITION_EPOCH, RestoreError, event_clock, floor_above, new_generation, previous_floor)
from tenancy.slugs import InvalidOrg, validate_slug
from tenancy.models import Org, OrgRestore, ReplicaGeneration

logger = logging.getLogger(__name__)

#: Seconds a restore waits for work in flight for the org to end by default.
DEFAULT_WAIT_SECONDS = 60.0


def parse_moment(text: str | None) -> dt.datetime | None:
    """Return ISO-8601 `text` as an aware UTC datetime (no offset: UTC); None for None/blank.

    Raises `RestoreError` for text that is not ISO-8601.
    """
    if text is None or not text.strip():
        return None
    try:
        moment = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise RestoreError(f"--at {text!r} is not an ISO-8601 moment (e.g. 2026-05-01T12:30:00Z)") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC)


def _check_org(slug: str) -> None:
    try:
        validate_slug(slug)
    except InvalidOrg as exc:
        raise RestoreError(f"unknown org {slug!r}: not a valid org slug") from exc
    if not Org.objects.using("default").filter(slug=slug).exists():
        raise RestoreError(f"unknown org {slug!r}: no such org on this server")


def _check_moment(moment: dt.datetime | None) -> None:
    if moment is not None and moment > timezone.now():
        raise RestoreError(f"the moment {moment.isoformat()} is in the future; give a past moment, or none for the latest")


# --------------------------------------------------------------------------------------------
# SQLite mode


def generation_for(slug: str, moment: dt.datetime | None):
    """Return the `ReplicaGeneration` of org `slug` that held `moment` (None: the current one).

    The newest generation started at or before the moment. Raises `RestoreError` when the org
    has no replica, or none that old.
    """
    generations = ReplicaGeneration.objects.using("default").filter(slug=slug, pruned_at__isnull=True)
    if moment is None:
        found = generations.filter(ended_at__isnull=True).first() or generations.order_by("-started_at").first()
    else:
        found = generations.filter(started_at__lte=moment).order_by("-started_at").first()
        if found is None and generations.exists():
            first = generations.order_by("started_at").first()
            raise RestoreError(f"the moment {moment.isoformat()} is before the first snapshot of org {slug!r} "
                               f"(its backup starts at {first.started_at.isoformat()})")
    if found is None:
        raise RestoreError(f"org {slug!r} has no backup yet: is AGENTS_BACKUP_URL set and `manage.py replicate` running?")
    return found


def _earliest_restorable(files: list[litestream.LtxFile]) -> dt.datetime | None:
    starts = [f.created_at for f in files if f.min_txid == 1 or f.level == litestream.SNAPSHOT_LEVEL]
    return min(starts) if starts else None


def _check_replica(slug: str, generation, moment: dt.datetime | None) -> dt.datetime | None:
    """Check the generation's replica holds the moment; return the moment to ask Litestream for.

    None (the latest) when the replica holds nothing newer than the moment: Litestream refuses a
    timestamp past its newest file ("timestamp does not exist"), yet that state is the moment's.
    """
    try:
        files = litestream.ltx_files(generation.replica_url)
    except litestream.LitestreamError as exc:
        raise RestoreError(f"the replica of org {slug!r} cannot be reached at {generation.replica_url}: {exc}") from exc
    earliest = _earliest_restorable(files)
    if earliest is None:
        raise RestoreError(f"the replica of org {slug!r} at {generation.replica_url} holds no snapshot yet")
    if moment is not None and moment < earliest:
        raise RestoreError(f"the moment {moment.isoformat()} is before the first snapshot of org {slug!r} "
                           f"(the earliest moment its replica can restore is {earliest.isoformat()})")
    if moment is None:
        return None
    newest = max(f.created_at for f in files)
    # `ltx -json` (any replica but file://) gives seconds only: keep a second's margin there.
    margin = dt.timedelta(0) if litestream.local_path(generation.replica_url) is not None else dt.timedelta(seconds=1)
    return None if moment >= newest + margin else moment


def _scratch_alias(path: Path, *, read_only: bool = False) -> str:
    alias = f"{registry.TEMPLATE_PREFIX}restore_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    entry = sqlite_settings(path)
    if read_only:
        entry["NAME"] = f"file:{path}?mode=ro"
        entry["OPTIONS"] = {**entry["OPTIONS"], "uri": True, "init_command": "", "transaction_mode": None}
        entry["OPTIONS"] = {k: v for k, v in entry["OPTIONS"].items() if v is not None and v != ""}
    registry.register(alias, entry)
    return alias


def _live_head(path: Path) -> int | None:
    """Return the event head of the live file if it can be read at all (deleted or corrupt: None)."""
    clock = event_clock()
    if not path.exists() or clock is None:
        return None
    alias = _scratch_alias(path, read_only=True)
    try:
        return clock.head(alias)
    except Exception as exc:  # noqa: BLE001 - a corrupt or half-deleted live file tells nothing
        logger.warning("restore: the live file %s cannot be read (%s); its head is unknown", path, exc)
        return None
    finally:
        registry.unregister(alias)


def _remove_sidecars(path: Path) -> None:
    for suffix in ("-wal", "-shm", "-journal"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    shutil.rmtree(path.parent / f".{path.name}-litestream", ignore_errors=True)


def _restore_sqlite(slug: str, moment: dt.datetime | None, record, *, wait: float, say: Callable[[str], None]):
    generation = generation_for(slug, moment)
    asked = _check_replica(slug, generation, moment)
    live = store_path(slug)
    live.parent.mkdir(parents=True, exist_ok=True)
    scratch = live.with_name(f".restore-{os.getpid()}-{uuid.uuid4().hex[:8]}.db")
    try:
        say(f"restoring {slug} from {litestream.redacted(generation.replica_url)} as of {moment.isoformat() if moment else 'the latest'}")
        try:
            summary = litestream.restore(generation.replica_url, scratch, moment=asked)
        except litestream.LitestreamError as exc:
            raise RestoreError(f"Litestream could not restore org {slug!r} from {generation.replica_url}: {exc}") from exc
        alias = _scratch_alias(scratch)
        try:
            migrate_if_behind(alias)  # a backup older than this code gets this code's migrations
            restored_head = clock.head(alias) if (clock := event_clock()) else 0
        finally:
            registry.unregister(alias)
        say(f"restored file ready (Litestream txid {summary.get('txid', '?')} in {summary.get('duration_ms', '?')} ms, "
            f"event head {restored_head}); taking the org offline")

        with fence.Fenced(slug) as fenced:
            fenced.raise_flag()
            try:
                fenced.drain(wait)
            except TimeoutError as exc:
                raise RestoreError(f"org {slug!r} could not be taken offline: {exc}") from exc
            say(f"org {slug} is offline (503 store_unavailable, condition restoring) in every process; swapping its store")
            offline_at = phase = time.monotonic()
            phases: dict[str, float] = {}

            def lap(name: str) -> None:
                nonlocal phase
                now = time.monotonic()
                phases[name], phase = now - phase, now

            control = litestream.Control()
            if control.alive():
                try:
                    control.unregister(str(live))
                except litestream.LitestreamError as exc:
                    # A deleted or corrupt file fails Litestream's last sync, but it is let go all the same.
                    if str(live) in control.databases():
                        raise RestoreError(f"replication of org {slug!r} could not be stopped for the restore: {exc}") from exc
                    say(f"replication of the old file stopped ({exc})")
            lap("replication stopped")
            floor = floor_above(restored_head, _live_head(live), previous_floor(slug))
            lap("old head read")
            alias = _scratch_alias(scratch)
            try:
                if (clock := event_clock()) is not None:
                    with transaction.atomic(using=alias):
                        clock.void_through(alias, floor)
            finally:
                registry.unregister(alias)
            with contextlib.closing(sqlite3.connect(scratch)) as conn:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            Path(str(scratch) + "-wal").unlink(missing_ok=True)
            Path(str(scratch) + "-shm").unlink(missing_ok=True)
            lap("clock moved")
            _remove_sidecars(live)
            os.replace(scratch, live)
            fd = os.open(live.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            with contextlib.suppress(Exception):
                stores.close_store(slug)  # this process's alias, if any, is registered afresh
            lap("file swapped")
            new_generation(slug, end_current=ReplicaGenerationEnd.RESTORED)
            record.restored_head, record.position_floor = restored_head, floor
            record.status, record.finished_at = RestoreStatus.DONE, timezone.now()
            record.save(using="default")
        lap("recorded")
        say(f"org {slug} is back as of {moment.isoformat() if moment else 'the latest backup'}: event head {restored_head}, "
            f"new events from {floor + 1}; offline {time.monotonic() - offline_at:.2f} s ("
            + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in phases.items()) + ")")
        return record
    finally:
        for suffix in ("", "-wal", "-shm", ".tmp"):
            Path(str(scratch) + suffix).unlink(missing_ok=True)


def restore_org(slug: str, moment: dt.datetime | None = None, *, wait: float = DEFAULT_WAIT_SECONDS,
                say: Callable[[str], None] = lambda _line: None):
    """Restore org `slug`'s store to `moment` (None: the latest backup); return its `OrgRestore`.

    Other orgs are served throughout; this one answers 503 `store_unavailable` (`restoring`)
    while its store is swapped. `wait`: seconds to wait for work in flight for the org to end.
    `say` receives progress lines. Raises `RestoreError` naming the cause (unknown org, a moment
    in the future or before the first snapshot, an unreachable replica, work still in flight);
    the live store is then untouched and the failure recorded.
    """
    _check_org(slug)
    _check_moment(moment)
    if fence.restoring(slug):
        raise RestoreError(f"org {slug!r} is already being restored")
    record = OrgRestore.objects.using("default").create(slug=slug, moment=moment, status=RestoreStatus.RUNNING)
    try:
        if get_backend().kind == "postgres":
            return postgres.restore(slug, moment, record, wait=wait, say=say)
        if not getattr(settings, "AGENTS_BACKUP_URL", ""):
            raise RestoreError("AGENTS_BACKUP_URL is not set: there is no replica to restore from")
        return _restore_sqlite(slug, moment, record, wait=wait, say=say)
    except BaseException as exc:
        record.status, record.finished_at = RestoreStatus.FAILED, timezone.now()
        record.error = litestream.hide_passwords(str(exc))[:2000] or type(exc).__name__
        record.save(using="default")
        raise
