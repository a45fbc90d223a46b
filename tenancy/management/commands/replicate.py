"""`manage.py replicate`: keep Litestream replicating the default database and every org file.

Long-running (the Procfile's `backup` process); needs `AGENTS_BACKUP_URL`. See
`tenancy.backups.replication` and docs/guides/backups.md.
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tenancy.backups import litestream
from tenancy.backups.replication import Supervisor


class Command(BaseCommand):
    help = "Continuously replicate the default database and every org's SQLite file to AGENTS_BACKUP_URL (Litestream)."

    def handle(self, *args, **options):
        if not settings.AGENTS_BACKUP_URL:
            raise CommandError("AGENTS_BACKUP_URL is not set: nothing to replicate to (a directory, or a Litestream replica URL)")
        if settings.AGENTS_ORG_DATABASE != "sqlite":
            raise CommandError("replicate is for SQLite org stores; in PostgreSQL mode use WAL archiving and backup_org_pg")
        try:
            Supervisor(say=lambda line: self.stdout.write(line, ending="\n") or self.stdout.flush()).run_forever()
        except litestream.LitestreamError as exc:
            raise CommandError(str(exc)) from exc
