"""The one vocabulary: every status, kind, mode and error code of the platform.

Models, API schemas, the admin, templates and JS read these words here and nowhere else
(templates and JS get them through `vocabulary_for_js()` and `json_script`). A string literal
such as `"done"` anywhere else is a bug waiting. Terminal sets sit beside their enums.
"""

from enum import StrEnum

from django.db import models


class AgentStatus(models.TextChoices):
    """The status of an agent definition (spec 003: always `ready`, server-set)."""

    READY = "ready", "ready"  # defined and runnable


class ExecutionMode(models.TextChoices):
    """How an agent is fired (spec 003: POST /v1/agents `executionMode`)."""

    ONE_SHOT = "one-shot", "one-shot"  # runs only when asked
    LONG_RUNNING = "long-running", "long-running"  # fired by the scheduler on its cron


class RunStatus(models.TextChoices):
    """The status of a run. History routes list only FINISHED runs."""

    QUEUED = "queued", "queued"  # background run accepted, not yet started
    RUNNING = "running", "running"  # executing now
    OK = "ok", "ok"  # finished and answered
    ERROR = "error", "error"  # finished and failed; its `error` says why


RunStatus.FINISHED = frozenset({RunStatus.OK, RunStatus.ERROR})
RunStatus.IN_FLIGHT = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})
# The runs that hold one fee against the org's balance until they finish (the balance gate
# counts them): every run accepted and not yet finished, queued or running, however old.
RunStatus.HOLDS_FEE = RunStatus.IN_FLIGHT


class RunKind(models.TextChoices):
    """What started a run. Every kind starts and finishes through the one run lifecycle."""

    RUN = "run", "run"  # POST /v1/agents/{ref}/run, answered at once or in the background
    SCHEDULED = "scheduled", "scheduled"  # fired by a long-running agent's cron
    ROUTED = "routed", "routed"  # executed on a registered machine (targetId)
    TOOL = "tool", "agent as tool"  # another agent called it as `agent_<name>`
    CHAT = "chat", "chat round"  # one round of POST /v1/agents/chat
    OPENAI = "openai", "OpenAI-compatible call"  # POST /v1/agents/openai/v1/chat/completions
    CODING = "coding", "coding run"  # POST /v1/agents/coding


class AgentHosting(models.TextChoices):
    """Where an agent's brain runs."""

    PLATFORM = "platform", "platform"  # executed here, through the run lifecycle
    EXTERNAL = "external", "external"  # an identity agent whose brain runs elsewhere; never executed here


class SlotOutcome(models.TextChoices):
    """What the scheduler decided for one (agent, scheduled minute); each slot is decided once."""

    FIRED = "fired", "fired"  # a run was queued for this slot
    BACKOFF = "backoff", "backoff"  # skipped: the agent backs off after failed runs
    BUSY = "busy", "busy"  # skipped: the agent's previous run is still in flight
    MISSED = "missed", "missed"  # skipped: older than AGENTS_CATCHUP_SECONDS, or a newer slot was due


class SessionStatus(models.TextChoices):
    """The status of a live session (spec 003: sessions). Terminal statuses never reopen."""

    RUNNING = "running", "running"  # live, working
    PAUSED = "paused", "paused"  # live, held by its surface
    DONE = "done", "done"  # finished well (terminal)
    ERROR = "error", "error"  # finished badly (terminal)


SessionStatus.TERMINAL = frozenset({SessionStatus.DONE, SessionStatus.ERROR})
SessionStatus.LIVE = frozenset({SessionStatus.RUNNING, SessionStatus.PAUSED})


class EventKind(models.TextChoices):
    """The kind of one turn in a session's ordered log (spec 003: POST …/events)."""

    MESSAGE = "message", "message"  # a prompt or a reply
    TOOL_CALL = "tool-call", "tool-call"  # a tool invocation and its result
    SPAWN = "spawn", "spawn"  # a subagent was started
    LOG = "log", "log"  # bookkeeping, e.g. the run summary
    STATUS = "status", "status"  # a status report from the running surface
    CONTROL = "control", "control"  # a steering command (pause/resume/stop/message)


class ControlCommand(models.TextChoices):
    """A steering command recorded as a `control` event (spec 003: POST …/{id}/{command})."""

    PAUSE = "pause", "pause"  # hold before the next step
    RESUME = "resume", "resume"  # carry on after a pause
    STOP = "stop", "stop"  # end the run for good
    MESSAGE = "message", "message"  # add a user turn before the next step


class StreamFrameKind(models.TextChoices):
    """The kind of one frame of the live session stream (spec 003: GET …/sessions/stream)."""

    SESSION = "session", "session"  # a session was registered or updated
    EVENT = "event", "event"  # one turn was appended to a session's log


class SecretSeverity(models.TextChoices):
    """How bad a credential found in a transcript is (reference §4); findings sort by it."""

    CRITICAL = "critical", "critical"  # grants broad access on its own (private key, cloud root key)
    HIGH = "high", "high"  # a scoped token for a service (GitHub, Slack, npm)
    MEDIUM = "medium", "medium"  # a likely secret recognised by shape or keyword
    LOW = "low", "low"  # weak evidence


SecretSeverity.RANK = {SecretSeverity.CRITICAL: 0, SecretSeverity.HIGH: 1, SecretSeverity.MEDIUM: 2, SecretSeverity.LOW: 3}


class TargetKind(models.TextChoices):
    """The kind of a registered machine (spec 003: POST /v1/agents/targets)."""

    LAPTOP = "laptop", "laptop"
    CLOUD = "cloud", "cloud"
    GPU = "gpu", "gpu"
    CLUSTER = "cluster", "cluster"
    MACHINE = "machine", "machine"


class TargetStatus(models.TextChoices):
    """A machine's status: stored as operator intent, answered as effective status."""

    ONLINE = "online", "online"  # accepting work
    OFFLINE = "offline", "offline"  # not accepting work (or no heartbeat for 90 s)
    DRAINING = "draining", "draining"  # finishing what it has, taking nothing new


class RoutedRunState(models.TextChoices):
    """Where one offer of the (org, target) mailbox stands (targets.models.RoutedRun)."""

    OFFERED = "offered", "offered"  # waiting for the machine's claim
    CLAIMED = "claimed", "claimed"  # won by exactly one claim; the machine is running it
    REPORTED = "reported", "reported"  # the machine reported its result (terminal)
    WITHDRAWN = "withdrawn", "withdrawn"  # the run was stopped or the target removed (terminal)


RoutedRunState.OPEN = frozenset({RoutedRunState.OFFERED, RoutedRunState.CLAIMED})


class LedgerKind(models.TextChoices):
    """The kind of a billing ledger row."""

    AGENT = "agent", "agent"  # the debit of one successful run (negative amount)
    CREDIT = "credit", "credit"  # money added to an org's balance (positive amount)


class ActivityKind(models.TextChoices):
    """The kind of one row of the activity feed (spec 003: GET /v1/agents/activity)."""

    INVOKED = "invoked", "invoked"  # a run finished ok
    FAILED = "failed", "failed"  # a run finished with an error
    CREATED = "created", "created"  # an agent was defined
    UPDATED = "updated", "updated"  # an agent's configuration changed


class ToolSource(models.TextChoices):
    """Where a tool an agent declares comes from (spec 003: POST /v1/agents `tools`)."""

    BUILTIN = "builtin", "built-in"  # shipped with the platform (current_time, calculator, http_get)
    AGENT = "agent", "agent"  # another agent of the org, named `agent_<name>`
    MCP = "mcp", "MCP server"  # served by an MCP server the org registered, `mcp__<server>__<tool>`
    MACHINE = "machine", "machine"  # served only by a registered machine's runner (`shell`): routed runs


class McpTransport(models.TextChoices):
    """How the platform talks to a registered MCP server."""

    STDIO = "stdio", "stdio command"  # a command started on this host, spoken to over stdin/stdout
    HTTP = "http", "streamable HTTP"  # an MCP endpoint URL (streamable-HTTP transport)


class MetricsRange(models.TextChoices):
    """The window of the invocations histogram (spec 003: GET /v1/agents/metrics `range`)."""

    DAY = "24h", "24 hourly buckets"  # 24 buckets of 1 hour
    WEEK = "7d", "7 daily buckets"  # 7 buckets of 24 hours
    MONTH = "30d", "30 daily buckets"  # 30 buckets of 24 hours (the default)


class PrincipalVia(models.TextChoices):
    """How a principal proved who it is."""

    API_KEY = "api_key", "API key"
    JWT = "jwt", "gateway JWT"
    SESSION = "session", "session login"


class ErrorCode(StrEnum):
    """Every error code an error body can carry (`{"status", "code", "error"}`)."""

    INVALID_REQUEST = "invalid_request"  # the body, query or path failed validation
    PAYLOAD_TOO_LARGE = "payload_too_large"  # the request body exceeds the upload limit
    FORBIDDEN = "forbidden"  # no validated principal, no org, or a bad credential
    NOT_FOUND = "not_found"  # unknown, or another org's (never told apart)
    CONFLICT = "conflict"  # the write collides with what is stored
    AGENT_EXISTS = "agent_exists"  # an agent of that name already exists in the org
    LONG_RUNNING_LIMIT = "long_running_limit"  # the org's cap on scheduled agents is reached
    SESSION_FINISHED = "session_finished"  # the session is done/error and cannot change
    SECRET_IN_TRANSCRIPT = "secret_in_transcript"  # a credential was found; nothing stored
    FORWARD_FAILED = "forward_failed"  # a control command was recorded but not forwarded
    INFERENCE_UNAVAILABLE = "inference_unavailable"  # no inference gateway configured
    INSUFFICIENT_BALANCE = "insufficient_balance"  # the org cannot pay the run fee
    BALANCE_UNAVAILABLE = "balance_unavailable"  # the ledger could not answer
    IDEMPOTENCY_MISMATCH = "idempotency_mismatch"  # key reused with a different body
    IDEMPOTENCY_IN_PROGRESS = "idempotency_in_progress"  # the key's first run has not finished yet
    RUN_NOT_QUEUED = "run_not_queued"  # a worker asked to execute a run that is not queued
    TARGET_UNAVAILABLE = "target_unavailable"  # the dispatch gate refused the machine
    CLAIM_REJECTED = "claim_rejected"  # a claim/report failed one of its two proofs
    METHOD_NOT_ALLOWED = "method_not_allowed"  # the route exists without this method
    AGENT_EXTERNAL = "agent_external"  # the agent's brain runs elsewhere; it cannot be executed here
    STORE_BUSY = "store_busy"  # no database connection came free within the pool wait; retry
    STORE_UNAVAILABLE = "store_unavailable"  # the org's store cannot take writes (read-only, full)
    INTERNAL = "internal_error"  # an unexpected fault; nothing half-written


class StoreCondition(StrEnum):
    """Why a store answered 503 `store_unavailable` (the body's `condition`)."""

    READ_ONLY = "read_only"  # the database file or server refuses writes
    FULL = "full"  # the database reached its size limit or its disk is full


# Badge colours used by the console for each status word (CSS colour names).
BADGE_COLOURS = {
    RunStatus.QUEUED: "#6b7280",
    RunStatus.RUNNING: "#2563eb",
    RunStatus.OK: "#15803d",
    RunStatus.ERROR: "#b91c1c",
    SessionStatus.PAUSED: "#b45309",
    SessionStatus.DONE: "#15803d",
    TargetStatus.ONLINE: "#15803d",
    TargetStatus.OFFLINE: "#6b7280",
    TargetStatus.DRAINING: "#b45309",
    AgentStatus.READY: "#15803d",
    ActivityKind.INVOKED: "#15803d",
    ActivityKind.FAILED: "#b91c1c",
    ActivityKind.CREATED: "#2563eb",
    ActivityKind.UPDATED: "#6b7280",
}


def vocabulary_for_js() -> dict:
    """Return the vocabulary as plain JSON-able data for templates (`json_script`).

    Output: `{"runStatus": [...], "runKind": [...], "sessionStatus": [...], "sessionTerminal": [...],
    "eventKind": [...], "controlCommand": [...], "targetKind": [...], "targetStatus": [...],
    "activityKind": [...], "metricsRange": [...], "badge": {word: colour}}`.
    """
    return {
        "runStatus": list(RunStatus.values),
        "runKind": list(RunKind.values),
        "sessionStatus": list(SessionStatus.values),
        "sessionTerminal": sorted(SessionStatus.TERMINAL),
        "eventKind": list(EventKind.values),
        "controlCommand": list(ControlCommand.values),
        "targetKind": list(TargetKind.values),
        "targetStatus": list(TargetStatus.values),
        "activityKind": list(ActivityKind.values),
        "metricsRange": list(MetricsRange.values),
        "badge": {str(k): v for k, v in BADGE_COLOURS.items()},
    }
