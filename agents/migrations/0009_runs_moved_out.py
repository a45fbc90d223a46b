"""The run records now belong to the runs app (issue 27 item 2): state only, the tables stay."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0008_approvals'),
        ('runs', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(model_name='runtask', name='run'),
                migrations.DeleteModel(name='Approval'),
                migrations.DeleteModel(name='IdempotencyRecord'),
                migrations.DeleteModel(name='RunTask'),
                migrations.DeleteModel(name='Run'),
            ],
        ),
    ]
