"""The run records of each org's store: runs, their queue tasks, approvals, idempotency keys.

These models moved here from the `agents` app (issue 27 item 2) without touching their tables:
each keeps its `agents_…` `db_table`, and the move is state-only (`runs/migrations/0001_initial`,
`agents/migrations/0009_runs_moved_out`). A run names its agent by a lazy reference
(`"agents.Agent"`): this app imports nothing of `agents`.
"""

from django.db import models

from agents_site.vocabulary import ApprovalState, FinishReason, RunKind, RunStatus


class Run(models.Model):
    """One execution: input, output or error, model, tokens, duration, its kind and fee.

    `agent` is None for a run no agent drives (a chat round of a preset). `fee_cents` is the
    fee the run holds from its start and is debited if it ends `ok`. `finished_at` is set when
    the run ends (`ok`/`error`); history routes list only those.
    """

    id = models.CharField(primary_key=True, max_length=64)
    agent = models.ForeignKey("agents.Agent", on_delete=models.CASCADE, related_name="runs", null=True, blank=True)
    agent_name = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=RunKind.choices, default=RunKind.RUN)
    fee_cents = models.IntegerField(default=0)
    status = models.CharField(max_length=16, choices=RunStatus.choices)
    model = models.CharField(max_length=200, default="", blank=True)
    input = models.TextField(default="", blank=True)
    output = models.TextField(default="", blank=True)
    error = models.TextField(default="", blank=True)
    duration_ms = models.IntegerField(default=0)
    attempts = models.IntegerField(default=0)
    prompt_tokens = models.IntegerField(null=True, blank=True)
    completion_tokens = models.IntegerField(null=True, blank=True)
    tool_calls = models.IntegerField(default=0)
    finish_reason = models.CharField(max_length=16, choices=FinishReason.choices, default="", blank=True)
    actor = models.CharField(max_length=300, default="", blank=True)
    trace_id = models.CharField(max_length=64, default="", blank=True)
    session_id = models.CharField(max_length=64, default="", blank=True)
    request_id = models.CharField(max_length=128, default="", blank=True)
    parent_run_id = models.CharField(max_length=64, default="", blank=True)
    depth = models.PositiveSmallIntegerField(default=0)
    # The caller's own labels (an OpenAI-compatible call's `metadata`: ≤ 16 string pairs), kept as sent.
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        db_table = "agents_run"  # the table it had in the agents app (moved state-only)
        ordering = ["-finished_at", "-created_at"]
        indexes = [
            models.Index(fields=["agent", "finished_at"], name="ix_runs_agent_finished"),
            models.Index(fields=["status", "finished_at"], name="ix_runs_status_finished"),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.status})"

    @property
    def truncated(self) -> bool:
        """True when the run's last reply was cut by the token limit (`finish_reason` `length`)."""
        return self.finish_reason == FinishReason.LENGTH


class Approval(models.Model):
    """One tool call of a run's model turn that waits for a person (issue 28).

    A turn with a call needing approval suspends the run (`waiting`): each of its calls gets a
    row, in the turn's order (`position`) — those needing approval `pending`, the others
    `waiting` with them. `arguments` is the JSON the tool will be given (the model's, or the
    approver's edit): it is kept here, unmasked, because the session's log masks credentials
    and the tool needs the real value; the log's `approval` event shows them masked. The state
    moves once per step by conditional UPDATEs (`runs.approvals`): `pending` →
    `approved`/`denied` by an answer, → `started` in the transaction that hands the call to the
    tool, → `done`; a `started` call found by a later resume becomes `interrupted` (never run twice).
    """

    id = models.CharField(primary_key=True, max_length=64)
    run_id = models.CharField(max_length=64, db_index=True)
    session_id = models.CharField(max_length=64, db_index=True)
    tool_call_id = models.CharField(max_length=128)
    tool_name = models.CharField(max_length=200)
    wire_name = models.CharField(max_length=200, default="", blank=True)
    arguments = models.TextField(default="", blank=True)
    needs_approval = models.BooleanField(default=True)
    position = models.PositiveSmallIntegerField(default=0)
    round = models.PositiveSmallIntegerField(default=1)
    state = models.CharField(max_length=16, choices=ApprovalState.choices, default=ApprovalState.PENDING)
    # The answer (`approved`/`denied`, "" until answered): `state` moves on (`started`, `done`),
    # the decision stays, so a finished run still says how each request was answered.
    decision = models.CharField(max_length=16, default="", blank=True)
    message = models.TextField(default="", blank=True)
    edited = models.BooleanField(default=False)
    answered_by = models.CharField(max_length=300, default="", blank=True)
    request_seq = models.BigIntegerField(null=True, blank=True)  # the `approval` event's seq in the session
    created_at = models.DateTimeField(db_index=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agents_approval"
        ordering = ["created_at", "position"]
        indexes = [models.Index(fields=["session_id", "tool_call_id"], name="ix_approvals_session_call")]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.state})"


class IdempotencyRecord(models.Model):
    """The first run answered for an `Idempotency-Key` of the org (spec: POST …/run).

    `request_hash` is the SHA-256 hex of the request (agent id and input); a later request
    with the same key and hash is answered this run, a different hash is a 409. Records older
    than `AGENTS_IDEMPOTENCY_TTL_SECONDS` are ignored and purged.
    """

    key = models.CharField(max_length=255, unique=True)
    request_hash = models.CharField(max_length=64)
    run_id = models.CharField(max_length=64)
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        db_table = "agents_idempotencyrecord"

    def __str__(self) -> str:
        return f"{self.key} → {self.run_id}"


class RunTask(models.Model):
    """The durable task of one queued run: queue id, worker and heartbeat lease.

    `task_id` is the django-q2 task id (the run's session carries it as `taskWorkflowId`);
    empty until the queue accepted it. `worker` is `host:pid` of the process executing it;
    `heartbeat_at` is renewed while it runs.
    """

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="task")
    task_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    enqueues = models.IntegerField(default=0)
    enqueued_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, default="")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "agents_runtask"

    def __str__(self) -> str:
        return f"task {self.task_id or '(not queued)'} of {self.run_id}"
