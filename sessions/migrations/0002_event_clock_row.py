"""Seed the org's event clock row (`id = 1`, `last = 0`) that every append increments."""

from django.db import migrations


def seed_clock(apps, schema_editor):
    EventClock = apps.get_model("agent_sessions", "EventClock")
    EventClock.objects.using(schema_editor.connection.alias).get_or_create(id=1, defaults={"last": 0})


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0001_initial")]

    operations = [migrations.RunPython(seed_clock, migrations.RunPython.noop)]
