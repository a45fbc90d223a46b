"""Agents, runs, idempotency records and MCP servers: all in the org's own store.

Routed by tenancy.db_router to the current org's database.
"""

from django.core.validators import RegexValidator, URLValidator
from django.db import models

from agents_site.ids import mint_id
from agents_site.vocabulary import AgentHosting, AgentStatus, ApprovalState, ExecutionMode, FinishReason, McpTransport, RunKind, RunStatus

MCP_SERVER_NAME_PATTERN = r"^[a-z0-9][a-z0-9-]{0,31}$"


class Agent(models.Model):
    """An agent definition: a model, instructions (system prompt) and tool names.

    `id` is `agent_` + 32 hex; `name` is unique in the org and immutable.
    """

    id = models.CharField(primary_key=True, max_length=64)
    name = models.CharField(max_length=64, unique=True)
    model = models.CharField(max_length=200, default="")
    instructions = models.TextField(default="", blank=True)
    description = models.TextField(default="", blank=True)
    tools = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=16, choices=AgentStatus.choices, default=AgentStatus.READY)
    execution_mode = models.CharField(max_length=16, choices=ExecutionMode.choices, default=ExecutionMode.ONE_SHOT)
    schedule = models.CharField(max_length=200, default="", blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    compute_ref = models.CharField(max_length=256, default="", blank=True)
    service_account_id = models.CharField(max_length=256, default="", blank=True)
    hosting = models.CharField(max_length=16, choices=AgentHosting.choices, default=AgentHosting.PLATFORM)
    # Generation settings passed to the gateway (None = the gateway's default; max_tokens is
    # always capped by AGENTS_MAX_OUTPUT_TOKENS).
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    temperature = models.FloatField(null=True, blank=True)
    top_p = models.FloatField(null=True, blank=True)
    # The model's context window in tokens (None: the gateway's model metadata, else
    # AGENTS_CONTEXT_WINDOW_TOKENS): the prompt's history is trimmed to fit it (issue 31).
    context_window = models.PositiveIntegerField(null=True, blank=True)
    # Which tool calls wait for a person (issue 28): `{"tools": ["http_get", "mcp__github__*"]}`,
    # exact tool names or prefixes ending in `*`; {} = none.
    approval = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["-updated_at", "name"]
        indexes = [models.Index(fields=["execution_mode", "schedule"], name="ix_agents_mode_schedule")]

    def __str__(self) -> str:
        return self.name


class Run(models.Model):
    """One execution: input, output or error, model, tokens, duration, its kind and fee.

    `agent` is None for a run no agent drives (a chat round of a preset). `fee_cents` is the
    fee the run holds from its start and is debited if it ends `ok`. `finished_at` is set when
    the run ends (`ok`/`error`); history routes list only those.
    """

    id = models.CharField(primary_key=True, max_length=64)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="runs", null=True, blank=True)
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
    created_at = models.DateTimeField(db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
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
    moves once per step by conditional UPDATEs (`agents.runs.approvals`): `pending` →
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
    message = models.TextField(default="", blank=True)
    edited = models.BooleanField(default=False)
    answered_by = models.CharField(max_length=300, default="", blank=True)
    request_seq = models.BigIntegerField(null=True, blank=True)  # the `approval` event's seq in the session
    created_at = models.DateTimeField(db_index=True)
    answered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
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

    def __str__(self) -> str:
        return f"{self.key} → {self.run_id}"


def new_mcp_server_id() -> str:
    """Return a fresh MCP server id, `mcp_` + 32 hex."""
    return mint_id("mcp")


class McpServer(models.Model):
    """An MCP server the org registered (org admins only, through the admin).

    Its tools are offered to agents as `mcp__<name>__<tool>`. `stdio`: `command` + `args`
    started on this host (only when `AGENTS_MCP_STDIO` is on); `http`: `url` of a
    streamable-HTTP endpoint.
    """

    id = models.CharField(primary_key=True, max_length=64, default=new_mcp_server_id, editable=False)
    name = models.CharField(
        max_length=32,
        unique=True,
        validators=[RegexValidator(MCP_SERVER_NAME_PATTERN, "lower-case letters, digits and '-', at most 32")],
        help_text="Agents call this server's tools mcp__‹this name›__‹tool›, e.g. mcp__github__search_issues.",
    )
    transport = models.CharField(max_length=16, choices=McpTransport.choices)
    command = models.CharField(max_length=500, default="", blank=True, help_text="stdio: the executable")
    args = models.JSONField(default=list, blank=True, help_text="stdio: the argument list (JSON array of strings)")
    url = models.CharField(
        max_length=500,
        default="",
        blank=True,
        validators=[URLValidator(schemes=["http", "https"])],
        help_text="http: the MCP endpoint, e.g. https://host/mcp",
    )
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """Require `command` for stdio and an http(s) `url` for http; raise `ValidationError`."""
        from django.core.exceptions import ValidationError

        if self.transport == McpTransport.STDIO:
            if not self.command.strip():
                raise ValidationError({"command": "a stdio MCP server needs a command"})
            if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
                raise ValidationError({"args": "args must be a JSON array of strings"})
        elif self.transport == McpTransport.HTTP and not self.url.startswith(("http://", "https://")):
            raise ValidationError({"url": "an http MCP server needs an http(s) URL"})


# Scheduler and background-task records live in agents/scheduling/models.py (same app).
from agents.scheduling.models import RunTask, ScheduledAgent, ScheduleSlot, ScheduleState  # noqa: E402,F401
