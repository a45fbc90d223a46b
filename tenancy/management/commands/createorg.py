"""`manage.py createorg SLUG [--name N] [--admin USERNAME --password P] [--member USERNAME]`."""

from django.core.management.base import BaseCommand, CommandError

from agents_site.errors import ApiError
from tenancy.services import membership_set, org_create


class Command(BaseCommand):
    help = "Create an org (and its store), optionally with an org admin user."

    def add_arguments(self, parser):
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--admin", default="", help="username of an org admin to create or attach")
        parser.add_argument("--member", default="", help="username of a plain member to create or attach")
        parser.add_argument("--password", default="", help="password for the user named by --admin/--member")

    def handle(self, *args, slug, name, admin, member, password, **options):
        try:
            org = org_create(slug=slug, name=name)
        except ApiError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"org {org.slug} ready")
        for username, is_admin in ((admin, True), (member, False)):
            if username:
                membership_set(org=org, username=username, password=password or None, is_admin=is_admin)
                self.stdout.write(f"{'admin' if is_admin else 'member'} {username} in {org.slug}")
