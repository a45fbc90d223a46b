"""Agents, runs, idempotency records and MCP servers: all in the org's own store.

Routed by tenancy.db_router to the current org's database.
"""

from django.core.validators import RegexValidator, URLValidator
from django.db import models

from agents_site.ids import mint_id
from agents_site.vocabulary import AgentHosting, AgentStatus, ExecutionMode, McpTransport

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


# Scheduler and background-task records live in agents/scheduling/models.py (same app); it imports
# nothing of this module (string foreign keys), so the two are no import cycle.
from agents.scheduling.models import ScheduleSlot, ScheduleState  # noqa: E402,F401


class ScheduledAgent(Agent):
    """A long-running agent seen as a schedule (the admin's schedules view; no table)."""

    class Meta:
        proxy = True
        verbose_name = "schedule"
        verbose_name_plural = "schedules"

