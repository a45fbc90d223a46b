"""`manage.py migrate_orgs`: apply pending migrations to every org's store, on every server."""

from django.core.management.base import BaseCommand

from tenancy import stores
from tenancy.models import Org


class Command(BaseCommand):
    help = "Migrate every org store (run on deploy, after `migrate`); build the store template everywhere."

    def handle(self, *args, **options):
        count = 0
        for slug in Org.objects.order_by("slug").values_list("slug", flat=True):
            stores.migrate_store(slug)  # opens the org's store where it is placed (PostgreSQL: its server)
            count += 1
        where = stores.ensure_templates()  # SQLite: the template file; PostgreSQL: every configured server
        self.stdout.write(f"migrated {count} org store(s); template ready on {len(where)} place(s): {', '.join(where)}")
