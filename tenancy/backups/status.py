"""Each org's backup as the operator sees it (`manage.py backup_status`, the admin).

SQLite mode: the org's current replica generation, how far its replica is behind the org file
(`lag_seconds`: 0 when Litestream has shipped everything it has seen; otherwise the seconds since
its last successful sync of that file), the newest LTX file in the replica and the last
snapshot (the newest level-9 file; before the first daily one, the generation's initial full
image). PostgreSQL mode: the newest `pg_dump` file of the org.
"""

from __future__ import annotations

import datetime as dt

from django.conf import settings
from django.utils import timezone

from agents_site.vocabulary import BackupState
from tenancy.backends.sqlite import store_path
from tenancy.backups import fence, litestream, postgres
from tenancy.backups.base import OrgBackupStatus
from tenancy.backups.replication import current_generation
from tenancy.models import Org


def _daemon_view() -> tuple[dict, dict]:
    control = litestream.Control()
    if not control.alive():
        return {}, {}
    try:
        return control.databases(), control.sync_status()
    except litestream.LitestreamError:
        return {}, {}


def _replica_max_txid(files: list[litestream.LtxFile]) -> int:
    return max((f.max_txid for f in files), default=0)


def org_status(slug: str, *, daemon: tuple[dict, dict] | None = None) -> OrgBackupStatus:
    """Return org `slug`'s backup status (reads the replica and asks the running daemon)."""
    if getattr(settings, "AGENTS_ORG_DATABASE", "sqlite") == "postgres":
        return postgres.status(slug)
    if not getattr(settings, "AGENTS_BACKUP_URL", ""):
        return OrgBackupStatus(slug, BackupState.OFF, detail="AGENTS_BACKUP_URL is not set")
    if fence.restoring(slug):
        return OrgBackupStatus(slug, BackupState.RESTORING, detail="restore_org is replacing its store")
    generation = current_generation(slug, create=False)
    if generation is None:
        return OrgBackupStatus(slug, BackupState.NO_BACKUP, detail="manage.py replicate has not picked it up yet")
    result = OrgBackupStatus(slug, BackupState.NOT_REPLICATING, replica_url=generation.replica_url)
    try:
        files = litestream.ltx_files(generation.replica_url)
    except litestream.LitestreamError as exc:
        result.state, result.detail = BackupState.UNREACHABLE, str(exc)
        return result
    snapshots = [f.created_at for f in files if f.level == litestream.SNAPSHOT_LEVEL] or \
                [f.created_at for f in files if f.min_txid == 1]
    result.last_snapshot = max(snapshots) if snapshots else None
    result.newest_change = max((f.created_at for f in files), default=None)
    databases, diagnostics = daemon if daemon is not None else _daemon_view()
    path = str(store_path(slug))
    if path not in databases:
        result.detail = "manage.py replicate is not running, or has not registered it yet"
        return result
    result.state = BackupState.REPLICATING
    local_txid = int((diagnostics.get(path) or {}).get("txid") or 0)
    behind = max(0, local_txid - _replica_max_txid(files))
    if behind == 0:
        result.lag_seconds = 0.0
    else:
        synced = databases[path].get("last_sync_at")
        since = dt.datetime.fromisoformat(synced.replace("Z", "+00:00")) if synced else result.newest_change
        result.lag_seconds = max(0.0, (timezone.now() - since).total_seconds()) if since else None
        result.detail = f"{behind} transaction(s) not shipped yet"
    return result


def all_statuses() -> list[OrgBackupStatus]:
    """Return the backup status of every org, by slug (one daemon query for them all)."""
    daemon = _daemon_view() if getattr(settings, "AGENTS_ORG_DATABASE", "sqlite") == "sqlite" else ({}, {})
    return [org_status(slug, daemon=daemon) for slug in Org.objects.using("default").order_by("slug").values_list("slug", flat=True)]
