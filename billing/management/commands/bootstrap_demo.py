"""`manage.py bootstrap_demo`: create the demo org, its admin and one API key, once.

Prints the login and the key the first time only; later runs say the demo already exists.
"""

import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from billing.services import credit_add
from tenancy.models import Org
from tenancy.services import api_key_create, membership_set, org_create


class Command(BaseCommand):
    help = "Create org 'demo' with an admin user and an API key (printed once)."

    def handle(self, *args, **options):
        User = get_user_model()
        if Org.objects.filter(slug="demo").exists() and User.objects.filter(username="admin").exists():
            self.stdout.write(
                "demo org exists; its login and key were printed when it was created.\n"
                "  lost them? a new key:      .venv/bin/python manage.py createapikey --org demo --user admin\n"
                "             a new password: .venv/bin/python manage.py changepassword admin"
            )
            return
        org = org_create(slug="demo", name="Demo")
        password = secrets.token_urlsafe(12)
        membership = membership_set(org=org, username="admin", password=password, is_admin=True)
        user = membership.user
        user.is_staff = True
        user.save(update_fields=["is_staff"])
        credit_add(org=org, cents=10_000, actor="bootstrap", note="demo credit")
        _, key = api_key_create(org=org, user=user, name="demo")
        self.stdout.write(
            "\n".join(
                [
                    "=" * 64,
                    "Demo org 'demo' created (shown once, keep it):",
                    f"  console/admin login: admin / {password}",
                    f"  API key:             {key}",
                    "  balance:             10000 cents",
                    "=" * 64,
                ]
            )
        )
