
import django.db.models.deletion
from django.db import migrations, models


"""The runs app takes over the run records from the agents app (issue 27 item 2), state only."""


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('agents', '0008_approvals'),
    ]

    operations = [
        # The tables stay where they are (`agents_run`, `agents_runtask`, `agents_approval`,
        # `agents_idempotencyrecord`, made by the agents app's 0001–0008): only Django's idea of
        # which app owns them changes. A store migrated before the move migrates on untouched.
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
            migrations.CreateModel(
                name='IdempotencyRecord',
                fields=[
                    ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                    ('key', models.CharField(max_length=255, unique=True)),
                    ('request_hash', models.CharField(max_length=64)),
                    ('run_id', models.CharField(max_length=64)),
                    ('created_at', models.DateTimeField(db_index=True)),
                ],
                options={
                    'db_table': 'agents_idempotencyrecord',
                },
            ),
            migrations.CreateModel(
                name='Run',
                fields=[
                    ('id', models.CharField(max_length=64, primary_key=True, serialize=False)),
                    ('agent_name', models.CharField(max_length=64)),
                    ('kind', models.CharField(choices=[('run', 'run'), ('scheduled', 'scheduled'), ('routed', 'routed'), ('tool', 'agent as tool'), ('chat', 'chat round'), ('openai', 'OpenAI-compatible call'), ('coding', 'coding run')], default='run', max_length=16)),
                    ('fee_cents', models.IntegerField(default=0)),
                    ('status', models.CharField(choices=[('queued', 'queued'), ('running', 'running'), ('waiting', 'waiting'), ('ok', 'ok'), ('error', 'error')], max_length=16)),
                    ('model', models.CharField(blank=True, default='', max_length=200)),
                    ('input', models.TextField(blank=True, default='')),
                    ('output', models.TextField(blank=True, default='')),
                    ('error', models.TextField(blank=True, default='')),
                    ('duration_ms', models.IntegerField(default=0)),
                    ('attempts', models.IntegerField(default=0)),
                    ('prompt_tokens', models.IntegerField(blank=True, null=True)),
                    ('completion_tokens', models.IntegerField(blank=True, null=True)),
                    ('tool_calls', models.IntegerField(default=0)),
                    ('finish_reason', models.CharField(blank=True, choices=[('stop', 'stop'), ('length', 'truncated'), ('content_filter', 'content filter'), ('tool_calls', 'tool calls'), ('stopped', 'stopped'), ('error', 'error')], default='', max_length=16)),
                    ('actor', models.CharField(blank=True, default='', max_length=300)),
                    ('trace_id', models.CharField(blank=True, default='', max_length=64)),
                    ('session_id', models.CharField(blank=True, default='', max_length=64)),
                    ('request_id', models.CharField(blank=True, default='', max_length=128)),
                    ('parent_run_id', models.CharField(blank=True, default='', max_length=64)),
                    ('depth', models.PositiveSmallIntegerField(default=0)),
                    ('created_at', models.DateTimeField(db_index=True)),
                    ('started_at', models.DateTimeField(blank=True, null=True)),
                    ('finished_at', models.DateTimeField(blank=True, db_index=True, null=True)),
                    ('agent', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='agents.agent')),
                ],
                options={
                    'db_table': 'agents_run',
                    'ordering': ['-finished_at', '-created_at'],
                },
            ),
            migrations.CreateModel(
                name='Approval',
                fields=[
                    ('id', models.CharField(max_length=64, primary_key=True, serialize=False)),
                    ('run_id', models.CharField(db_index=True, max_length=64)),
                    ('session_id', models.CharField(db_index=True, max_length=64)),
                    ('tool_call_id', models.CharField(max_length=128)),
                    ('tool_name', models.CharField(max_length=200)),
                    ('wire_name', models.CharField(blank=True, default='', max_length=200)),
                    ('arguments', models.TextField(blank=True, default='')),
                    ('needs_approval', models.BooleanField(default=True)),
                    ('position', models.PositiveSmallIntegerField(default=0)),
                    ('round', models.PositiveSmallIntegerField(default=1)),
                    ('state', models.CharField(choices=[('pending', 'pending'), ('waiting', 'waits with the others'), ('approved', 'approved'), ('denied', 'denied'), ('started', 'started'), ('done', 'done'), ('interrupted', 'interrupted, not re-run'), ('expired', 'expired'), ('cancelled', 'cancelled')], default='pending', max_length=16)),
                    ('message', models.TextField(blank=True, default='')),
                    ('edited', models.BooleanField(default=False)),
                    ('answered_by', models.CharField(blank=True, default='', max_length=300)),
                    ('request_seq', models.BigIntegerField(blank=True, null=True)),
                    ('created_at', models.DateTimeField(db_index=True)),
                    ('answered_at', models.DateTimeField(blank=True, null=True)),
                ],
                options={
                    'db_table': 'agents_approval',
                    'ordering': ['created_at', 'position'],
                    'indexes': [models.Index(fields=['session_id', 'tool_call_id'], name='ix_approvals_session_call')],
                },
            ),
            migrations.CreateModel(
                name='RunTask',
                fields=[
                    ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='task', serialize=False, to='runs.run')),
                    ('task_id', models.CharField(blank=True, db_index=True, default='', max_length=64)),
                    ('enqueues', models.IntegerField(default=0)),
                    ('enqueued_at', models.DateTimeField(blank=True, null=True)),
                    ('worker', models.CharField(blank=True, default='', max_length=200)),
                    ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                    ('created_at', models.DateTimeField()),
                ],
                options={
                    'db_table': 'agents_runtask',
                },
            ),
            migrations.AddIndex(
                model_name='run',
                index=models.Index(fields=['agent', 'finished_at'], name='ix_runs_agent_finished'),
            ),
            migrations.AddIndex(
                model_name='run',
                index=models.Index(fields=['status', 'finished_at'], name='ix_runs_status_finished'),
            ),
            ],
        ),
    ]
