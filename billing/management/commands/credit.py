"""`manage.py credit SLUG CENTS`: add a ledger credit to an org's balance."""

from django.core.management.base import BaseCommand, CommandError

from agents_site.errors import ApiError
from billing.selectors import balance_cents
from billing.services import credit_add
from tenancy.models import Org


class Command(BaseCommand):
    help = "Credit an org's balance with CENTS (a ledger row of kind credit)."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("cents", type=int)

    def handle(self, *args, slug, cents, **options):
        org = Org.objects.filter(slug=slug).first()
        if org is None:
            raise CommandError(f"no org {slug!r}")
        try:
            credit_add(org=org, cents=cents, actor="manage.py credit")
        except ApiError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"{slug}: balance {balance_cents(org=org)} cents")
