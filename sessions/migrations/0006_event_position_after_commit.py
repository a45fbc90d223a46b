"""Event positions may be given after the append's commit (PostgreSQL: `sessions.clock`).

`position` becomes nullable (a committed event waits a moment for the org's sequencer) and a
partial index finds the events still waiting. Existing events keep their positions.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("agent_sessions", "0005_approvals")]

    operations = [
        migrations.AlterField(
            model_name="event",
            name="position",
            field=models.PositiveBigIntegerField(blank=True, null=True, unique=True),
        ),
        migrations.AddIndex(
            model_name="event",
            index=models.Index(condition=models.Q(("position__isnull", True)), fields=["session", "seq"], name="ix_events_unpositioned"),
        ),
    ]
