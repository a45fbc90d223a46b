"""`manage.py createapikey --org SLUG --user USERNAME [--name N]`: print a new key once."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents_site.errors import ApiError
from tenancy.models import Org
from tenancy.services import api_key_create


class Command(BaseCommand):
    help = "Mint an API key for a member of an org. The key is printed once and never stored."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True)
        parser.add_argument("--user", required=True)
        parser.add_argument("--name", default="")

    def handle(self, *args, org, user, name, **options):
        org_row = Org.objects.filter(slug=org).first()
        user_row = get_user_model().objects.filter(username=user).first()
        if org_row is None or user_row is None:
            raise CommandError("unknown org or user")
        try:
            _, key = api_key_create(org=org_row, user=user_row, name=name)
        except ApiError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(key)
