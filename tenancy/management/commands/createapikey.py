"""`manage.py createapikey --org SLUG --user USERNAME [--name N] [--scope all|openai] [--agent NAME …]`:
print a new key once (`--scope openai` limits it to the OpenAI-compatible endpoint, `--agent`
to those agents there)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from agents_site.errors import ApiError
from agents_site.vocabulary import ApiKeyScope
from tenancy.models import Org
from tenancy.services import api_key_create


class Command(BaseCommand):
    help = "Mint an API key for a member of an org. The key is printed once and never stored."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True)
        parser.add_argument("--user", required=True)
        parser.add_argument("--name", default="")
        parser.add_argument("--scope", default=ApiKeyScope.ALL, choices=ApiKeyScope.values)
        parser.add_argument("--agent", action="append", default=[], dest="agents",
                            help="an agent (name or id) the key may use on the OpenAI-compatible endpoint; repeat")

    def handle(self, *args, org, user, name, scope, agents, **options):
        org_row = Org.objects.filter(slug=org).first()
        user_row = get_user_model().objects.filter(username=user).first()
        if org_row is None or user_row is None:
            raise CommandError("unknown org or user")
        try:
            _, key = api_key_create(org=org_row, user=user_row, name=name, scope=scope, allowed_agents=agents)
        except ApiError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(key)
