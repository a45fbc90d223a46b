"""`manage.py restore_org SLUG [--at ISO-8601] [--wait SECONDS]`: bring one org back to a moment.

The other orgs are served throughout; this one answers 503 `store_unavailable` (`restoring`)
while its store is swapped. Exits non-zero with the cause (unknown org, a moment in the future
or before the first snapshot, an unreachable replica, work in flight) and changes nothing then.
"""

from django.core.management.base import BaseCommand, CommandError

from tenancy.backups.restore import DEFAULT_WAIT_SECONDS, RestoreError, parse_moment, restore_org


class Command(BaseCommand):
    help = "Restore one org's store from its backup to a moment (default: the latest)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--at", default=None, help="the moment, ISO-8601 (UTC when no offset); default: the latest")
        parser.add_argument("--wait", type=float, default=DEFAULT_WAIT_SECONDS,
                            help="seconds to wait for work in flight for the org to end (default 60)")

    def handle(self, *args, slug, at, wait, **options):
        try:
            record = restore_org(slug, parse_moment(at), wait=wait, say=lambda line: self.stdout.write(line))
        except RestoreError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"restored {slug}: event head {record.restored_head}, next position {record.position_floor + 1}")
