"""`manage.py replicate`: one long-running process that keeps Litestream replicating every store.

It renders Litestream's config (the default database, when it is SQLite, and every org file
with its current replica generation), starts `litestream replicate` as its child, and then
every `AGENTS_BACKUP_POLL_SECONDS` reconciles what Litestream replicates with what should be:

* a new org (or one whose restore just finished, under its new generation) is registered
  through the control socket — no restart;
* an org whose generation lives under another `AGENTS_BACKUP_URL` than today's (the setting
  changed) ends it (`moved`) and starts one under the new URL;
* an org being restored (its fence flag up) is left alone: `restore_org` stops its replication
  itself and the new file is registered once the flag is down;
* an org whose row was removed is unregistered; its generation ends (`removed`) and its replica
  is kept for `AGENTS_BACKUP_RETENTION_DAYS`;
* generations ended longer ago than that are deleted (`file://` replicas; for an object store
  the row says it is due, and the bucket's lifecycle rule or the operator deletes it).

A Litestream that exits is started again (with every database registered afresh) after a
short back-off; SIGTERM/SIGINT stop it (it syncs a last time) and end the command.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from agents_site.vocabulary import ReplicaGenerationEnd
from tenancy.backends.sqlite import store_path
from tenancy.backups import fence, litestream
from tenancy.backups.base import new_generation
from tenancy.models import Org, ReplicaGeneration

logger = logging.getLogger(__name__)

_DEFAULT_REPLICA = "default"


def default_database_path() -> str | None:
    """Return the default database's file when it is SQLite (None on PostgreSQL)."""
    from django.db import connections

    entry = connections["default"].settings_dict
    return str(entry["NAME"]) if "sqlite" in entry["ENGINE"] else None


def current_generation(slug: str, *, create: bool = True):
    """Return org `slug`'s current `ReplicaGeneration`, starting its first one if it has none."""
    found = ReplicaGeneration.objects.using("default").filter(slug=slug, ended_at__isnull=True).first()
    if found is not None or not create:
        return found
    return new_generation(slug, end_current=None)


def _last_error(log_path: Path, offset: int) -> str:
    """Return Litestream's last `Error: …` line (else its last line) written to its log past `offset`."""
    try:
        with open(log_path, "rb") as log:
            log.seek(offset)
            lines = [line.strip() for line in log.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return "its log cannot be read"
    errors = [line for line in lines if line.startswith("Error:")]
    return (errors or lines or ["it printed nothing"])[-1]


class Supervisor:
    """Litestream as a child process, kept in step with the orgs of the default database."""

    def __init__(self, *, say=lambda _line: None) -> None:
        self.say = say
        self.proc: subprocess.Popen | None = None
        self.control = litestream.Control()
        self.registered: dict[str, str] = {}  # database path → replica URL, as registered
        self.stopping = threading.Event()

    # -- the desired state -----------------------------------------------------------------
    def desired(self) -> dict[str, str]:
        """Return `{database path: replica URL}` of every store that should be replicated now."""
        base = litestream.base_url()
        wanted: dict[str, str] = {}
        default_path = default_database_path()
        if default_path:
            wanted[default_path] = litestream.join(base, _DEFAULT_REPLICA)
        for slug in Org.objects.using("default").order_by("slug").values_list("slug", flat=True):
            path = store_path(slug)
            if fence.restoring(slug) or not path.exists():
                continue  # restore_org owns it now / not provisioned yet (or lost: restore it)
            generation = current_generation(slug)
            target = litestream.join(base, "orgs", slug, generation.name)
            if litestream.location(generation.replica_url) != litestream.location(target):
                # AGENTS_BACKUP_URL changed: ship to the new replica (a full first snapshot there);
                # the old line stays restorable at its URL until the retention ends it.
                generation = new_generation(slug, end_current=ReplicaGenerationEnd.MOVED)
                self.say(f"AGENTS_BACKUP_URL changed: org {slug} starts a new replica at {litestream.redacted(generation.replica_url)}")
            elif generation.replica_url != target:
                # Only the credentials changed (a rotated password): the same replica, reached and
                # restored with the new ones; the line and its history go on.
                type(generation).objects.using("default").filter(pk=generation.pk).update(replica_url=target)
                generation.replica_url = target
            wanted[str(path)] = generation.replica_url
        return wanted

    # -- Litestream ------------------------------------------------------------------------
    def start(self) -> None:
        """Write the config for today's stores and start `litestream replicate`; wait for its socket."""
        wanted = self.desired()
        config = litestream.state_dir() / "litestream.yml"
        config.write_text(litestream.render_config(sorted(wanted.items())))
        log_path = litestream.state_dir() / "litestream.log"
        log = open(log_path, "ab")
        logged_from = log.tell()
        self.proc = subprocess.Popen([litestream.binary(), "replicate", "-config", str(config)],
                                     stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while not self.control.alive():
            if self.proc.poll() is not None:
                raise litestream.LitestreamError(f"litestream exited {self.proc.returncode}: "
                                                 f"{_last_error(log_path, logged_from)} (see {log_path})")
            if time.monotonic() > deadline:
                raise litestream.LitestreamError("litestream did not open its control socket within 60 s")
            time.sleep(0.05)
        self.registered = dict(wanted)
        self.say(f"replicating {len(wanted)} database(s) to {litestream.base_url()} (litestream pid {self.proc.pid})")

    def stop(self) -> None:
        """Stop Litestream (SIGTERM: it syncs what it holds first)."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    # -- one pass ----------------------------------------------------------------------------
    def reconcile(self) -> None:
        """Register new and restored stores, unregister removed ones, prune expired generations."""
        wanted = self.desired()
        running = self.control.databases()
        for path, url in wanted.items():
            if self.registered.get(path) == url and path in running:
                continue
            if path in running:  # its generation changed (restored): the old line is finished
                self.control.unregister(path)
            self.control.register(path, url)
            self.registered[path] = url
            self.say(f"replicating {path} to {url}")
        for path in list(running):
            if path in wanted:
                continue
            slug = Path(path).parent.name
            if self._org_removed(path, slug):
                self.control.unregister(path)
                self._end_removed(slug)
                self.say(f"org {slug} removed: replication stopped, replica kept {settings.AGENTS_BACKUP_RETENTION_DAYS} day(s)")
            self.registered.pop(path, None)
        self.end_orphaned_generations()
        self.prune()

    def _org_removed(self, path: str, slug: str) -> bool:
        if path == default_database_path():
            return False
        if fence.restoring(slug) and Org.objects.using("default").filter(slug=slug).exists():
            return False  # restore_org unregisters it itself
        return not Org.objects.using("default").filter(slug=slug).exists()

    @staticmethod
    def _end_removed(slug: str) -> None:
        ReplicaGeneration.objects.using("default").filter(slug=slug, ended_at__isnull=True).update(
            ended_at=timezone.now(), end_reason=ReplicaGenerationEnd.REMOVED)

    def end_orphaned_generations(self) -> None:
        """End the current generation of every org whose row is gone (removed while we were down)."""
        live = set(Org.objects.using("default").values_list("slug", flat=True))
        for slug in (ReplicaGeneration.objects.using("default").filter(ended_at__isnull=True)
                     .exclude(slug__in=live).values_list("slug", flat=True)):
            self._end_removed(slug)

    def prune(self) -> int:
        """Delete replicas of generations ended more than the retention ago; return how many."""
        cutoff = timezone.now() - dt.timedelta(days=int(settings.AGENTS_BACKUP_RETENTION_DAYS))
        done = 0
        for generation in ReplicaGeneration.objects.using("default").filter(ended_at__lt=cutoff, pruned_at__isnull=True):
            root = litestream.local_path(generation.replica_url)
            if root is None:
                continue  # an object store: its lifecycle rule (or the operator) deletes it; the row stays due
            shutil.rmtree(root, ignore_errors=True)
            generation.pruned_at = timezone.now()
            generation.save(using="default", update_fields=["pruned_at"])
            done += 1
            self.say(f"deleted the replica of {generation} (ended {generation.ended_at:%Y-%m-%d}, past retention)")
        return done

    # -- the loop ------------------------------------------------------------------------------
    def _start_until_up(self) -> bool:
        """Start Litestream, retrying with a back-off (up to a minute) while it cannot start, e.g.
        an unreachable replica; each failure is said with its cause. Never gives up: this process
        exiting would stop the Procfile's web and worker too. False once told to stop."""
        backoff = 1.0
        while not self.stopping.is_set():
            try:
                self.start()
                return True
            except litestream.LitestreamError as exc:
                self.stop()  # one that started but never opened its socket must not outlive the retry
                self.say(f"replication is not running: {exc}; trying again in {backoff:.0f} s")
            if self.stopping.wait(backoff):
                break
            backoff = min(backoff * 2, 60.0)
        return False

    def run_forever(self) -> None:
        """Start Litestream and reconcile until SIGTERM/SIGINT; restart Litestream if it dies."""
        def _stop(signum, frame):
            self.stopping.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        backoff = 1.0
        try:
            if not self._start_until_up():
                return
            while not self.stopping.wait(float(settings.AGENTS_BACKUP_POLL_SECONDS)):
                if self.proc.poll() is not None:
                    self.say(f"litestream exited {self.proc.returncode}; starting it again in {backoff:.0f} s")
                    if self.stopping.wait(backoff):
                        break
                    backoff = min(backoff * 2, 60.0)
                    if not self._start_until_up():
                        break
                    continue
                try:
                    self.reconcile()
                    backoff = 1.0
                except Exception as exc:  # noqa: BLE001 - one failed pass is logged and retried
                    logger.exception("replicate: reconcile failed")
                    self.say(f"reconcile failed, retrying: {exc}")
                finally:
                    close_old_connections()
        finally:
            self.stop()
