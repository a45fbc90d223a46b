"""`manage.py backup_org_pg SLUG`: `pg_dump --format=custom` of one org's database (PostgreSQL org mode)."""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from tenancy.backups import postgres
from tenancy.backups.restore import RestoreError, _check_org


class Command(BaseCommand):
    help = "Dump one org's PostgreSQL database to {AGENTS_BACKUP_URL}/pg/{slug}/{UTC time}.dump (restore_org restores it)."

    def add_arguments(self, parser):
        parser.add_argument("slug")

    def handle(self, *args, slug, **options):
        if settings.AGENTS_ORG_DATABASE != "postgres":
            raise CommandError("backup_org_pg is for AGENTS_ORG_DATABASE=postgres; SQLite org files are replicated by `replicate`")
        if not settings.AGENTS_BACKUP_URL:
            raise CommandError("AGENTS_BACKUP_URL is not set: the directory dumps go to")
        try:
            _check_org(slug)
            path = postgres.backup(slug)
        except RestoreError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(path))
