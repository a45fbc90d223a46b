"""`manage.py ensure_schedules`: create or update the django-q2 schedules of the platform.

Idempotent: run it on every deploy (`make run` does, before starting the cluster). Each
schedule is keyed by its name; a changed function or cron is updated in place and its next
run recomputed; an unchanged one is left alone (its next run is kept).
"""

from django.core.management.base import BaseCommand
from django.db import DEFAULT_DB_ALIAS, transaction

from agents import tasks as agents_tasks
from identity import tasks as identity_tasks
from webhooks import tasks as webhooks_tasks

#: name → (function, cron): every app's `tasks.SCHEDULES`. The composition root imports each app
#: (a plain downward import), so no app registers its schedules with a lower one at run time.
SCHEDULES = {**agents_tasks.SCHEDULES, **webhooks_tasks.SCHEDULES, **identity_tasks.SCHEDULES}


def ensure_schedules() -> dict[str, str]:
    """Create/update the platform's q2 schedules; return `{name: "created"|"updated"|"unchanged"}`."""
    from django_q.models import Schedule

    result: dict[str, str] = {}
    with transaction.atomic(using=DEFAULT_DB_ALIAS):  # django-q2's schedules live in default
        for name, (func, cron) in SCHEDULES.items():
            rows = list(Schedule.objects.select_for_update().filter(name=name).order_by("id"))
            for extra in rows[1:]:  # a duplicate from an older, non-idempotent setup
                extra.delete()
            row = rows[0] if rows else None
            if row is None:
                Schedule.objects.create(name=name, func=func, schedule_type=Schedule.CRON, cron=cron, repeats=-1)
                result[name] = "created"
            elif (row.func, row.schedule_type, row.cron, row.repeats) != (func, Schedule.CRON, cron, -1):
                row.func, row.schedule_type, row.cron, row.repeats = func, Schedule.CRON, cron, -1
                row.next_run = row.calculate_next_run()
                row.save()
                result[name] = "updated"
            else:
                result[name] = "unchanged"
    return result


class Command(BaseCommand):
    help = "Create or update the django-q2 schedules (scheduler tick, sweep). Idempotent."

    def handle(self, *args, **options):
        for name, outcome in ensure_schedules().items():
            self.stdout.write(f"{name}: {outcome}")
