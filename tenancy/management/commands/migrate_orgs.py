"""`manage.py migrate_orgs`: apply pending migrations to every org's store."""

from django.core.management.base import BaseCommand

from tenancy import stores
from tenancy.models import Org


class Command(BaseCommand):
    help = "Migrate every org store (run on deploy, after `migrate`)."

    def handle(self, *args, **options):
        count = 0
        for slug in Org.objects.order_by("slug").values_list("slug", flat=True):
            stores.migrate_store(slug)
            count += 1
        stores.template_path()
        self.stdout.write(f"migrated {count} org store(s)")
