"""The one vocabulary: every status, kind, mode and error code of the platform.

Models, API schemas, the admin, templates and JS read these words here and nowhere else
(templates and JS get them through `vocabulary_for_js()` and `json_script`). A string literal
such as `"done"` anywhere else is a bug waiting. Terminal sets sit beside their enums.

The words the runner and the shared core speak too (run statuses and kinds, finish reasons, chat
roles, session statuses, event kinds, control verbs, target kinds, machine sandboxes) are spelled
once in the Django-free `toolkit.wire`; their `TextChoices` here take each value from there.
"""

import json
from enum import StrEnum

from django.db import models

from toolkit import wire


class AgentStatus(models.TextChoices):
    """The status of an agent definition (spec 003: always `ready`, server-set)."""

    READY = "ready", "ready"  # defined and runnable


class ExecutionMode(models.TextChoices):
    """How an agent is fired (spec 003: POST /v1/agents `executionMode`)."""

    ONE_SHOT = "one-shot", "one-shot"  # runs only when asked
    LONG_RUNNING = "long-running", "long-running"  # fired by the scheduler on its cron


class RunStatus(models.TextChoices):
    """The status of a run. History routes list only FINISHED runs."""

    QUEUED = wire.RunStatus.QUEUED.value, "queued"  # background run accepted, not yet started
    RUNNING = wire.RunStatus.RUNNING.value, "running"  # executing now
    WAITING = wire.RunStatus.WAITING.value, "waiting"  # suspended until a person answers its approval requests (holds its fee, holds nothing else)
    OK = wire.RunStatus.OK.value, "ok"  # finished and answered
    ERROR = wire.RunStatus.ERROR.value, "error"  # finished and failed; its `error` says why


RunStatus.FINISHED = frozenset({RunStatus.OK, RunStatus.ERROR})
RunStatus.IN_FLIGHT = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})
# The runs that hold one fee against the org's balance until they finish (the balance gate
# counts them): every run accepted and not yet finished, queued, running or waiting for an
# approval, however old.
RunStatus.HOLDS_FEE = RunStatus.IN_FLIGHT | {RunStatus.WAITING}
# Every run not finished (what a stop or an expiry may end).
RunStatus.UNFINISHED = RunStatus.HOLDS_FEE


class FinishReason(models.TextChoices):
    """Why a finished run's last model reply ended (the run's `finishReason`; issues 25 and 31).

    The gateway's own `finish_reason` words pass through (`stop`, `length`, `content_filter`,
    `tool_calls`); `stopped` is a user's stop, `error` a failure. Empty (null in the API) for a
    run that has not finished or ended before any model reply was read.
    """

    STOP = wire.FinishReason.STOP.value, "stop"  # the model ended its reply
    LENGTH = wire.FinishReason.LENGTH.value, "truncated"  # cut by the token limit (maxTokens)
    CONTENT_FILTER = wire.FinishReason.CONTENT_FILTER.value, "content filter"  # cut by the gateway's content filter
    TOOL_CALLS = wire.FinishReason.TOOL_CALLS.value, "tool calls"  # the reply handed tool calls to the client
    STOPPED = wire.FinishReason.STOPPED.value, "stopped"  # a stop command ended the run
    ERROR = wire.FinishReason.ERROR.value, "error"  # the run failed


class RunKind(models.TextChoices):
    """What started a run. Every kind starts and finishes through the one run lifecycle."""

    RUN = wire.RunKind.RUN.value, "run"  # POST /v1/agents/{ref}/run, answered at once or in the background
    SCHEDULED = wire.RunKind.SCHEDULED.value, "scheduled"  # fired by a long-running agent's cron
    ROUTED = wire.RunKind.ROUTED.value, "routed"  # executed on a registered machine (targetId)
    TOOL = wire.RunKind.TOOL.value, "agent as tool"  # another agent called it as `agent_<name>`
    CHAT = wire.RunKind.CHAT.value, "chat round"  # one round of POST /v1/agents/chat
    OPENAI = wire.RunKind.OPENAI.value, "OpenAI-compatible call"  # POST /v1/agents/openai/v1/chat/completions
    CODING = wire.RunKind.CODING.value, "coding run"  # POST /v1/agents/coding
    A2A = wire.RunKind.A2A.value, "A2A task"  # SendMessage / SendStreamingMessage on POST /v1/agents/{ref}/a2a (A2A JSON-RPC)
    MCP = wire.RunKind.MCP.value, "MCP tool call"  # tools/call of an agent's tool on /v1/agents/mcp (the MCP server)
    RESPONSES = wire.RunKind.RESPONSES.value, "OpenAI response"  # POST /v1/agents/openai/v1/responses (the Responses API)


class RefusalAnswer(models.TextChoices):
    """How a kind of run answers a refusal at its start (its `RunPolicy`, `runs.policies`):
    the balance gate (402/503) or missing inference (503)."""

    RAISE = "raise", "raise"  # the caller gets the error; nothing is recorded
    RECORD = "record", "record"  # a finished `error` run "not started: …" is recorded instead (scheduled runs)


class ChatRole(models.TextChoices):
    """Who wrote one message of a conversation or a prompt (POST /v1/agents/chat, the
    OpenAI-compatible endpoint; OpenAI's roles)."""

    SYSTEM = wire.ChatRole.SYSTEM.value, "system"  # an instruction to the model
    USER = wire.ChatRole.USER.value, "user"  # the person talking
    ASSISTANT = wire.ChatRole.ASSISTANT.value, "assistant"  # the model's reply
    TOOL = wire.ChatRole.TOOL.value, "tool"  # a tool's result the caller sends back


class MultitaskStrategy(models.TextChoices):
    """What a chat round does when its conversation already has a round in flight."""

    REJECT = "reject", "reject"  # refuse it: 409 conversation_busy (the default)
    ENQUEUE = "enqueue", "enqueue"  # wait for the round in flight (bounded), then run after it


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

    RUNNING = wire.SessionStatus.RUNNING.value, "running"  # live, working
    PAUSED = wire.SessionStatus.PAUSED.value, "paused"  # live, held by its surface
    DONE = wire.SessionStatus.DONE.value, "done"  # finished well (terminal)
    ERROR = wire.SessionStatus.ERROR.value, "error"  # finished badly (terminal)


SessionStatus.TERMINAL = frozenset({SessionStatus.DONE, SessionStatus.ERROR})
SessionStatus.LIVE = frozenset({SessionStatus.RUNNING, SessionStatus.PAUSED})


class EventKind(models.TextChoices):
    """The kind of one turn in a session's ordered log (spec 003: POST …/events)."""

    MESSAGE = wire.EventKind.MESSAGE.value, "message"  # a prompt or a reply
    TOOL_CALL = wire.EventKind.TOOL_CALL.value, "tool-call"  # a tool invocation and its result
    SPAWN = wire.EventKind.SPAWN.value, "spawn"  # a subagent was started
    LOG = wire.EventKind.LOG.value, "log"  # bookkeeping, e.g. the run summary
    STATUS = wire.EventKind.STATUS.value, "status"  # a status report from the running surface
    CONTROL = wire.EventKind.CONTROL.value, "control"  # a steering command (pause/resume/stop/message)
    COMMIT = wire.EventKind.COMMIT.value, "commit"  # a coding run committed its working copy (sha, subject, diffstat)
    APPROVAL = wire.EventKind.APPROVAL.value, "approval"  # a run asks a person to approve one tool call (recorded by the platform only)


#: The kinds a caller may append (POST …/events): an `approval` is recorded only by the run that asks.
EventKind.APPENDABLE = tuple(kind for kind in EventKind.values if kind != EventKind.APPROVAL)


class CodingTool(models.TextChoices):
    """The engine a coding run uses (POST /v1/agents/coding `tool`; reference §8.2)."""

    DEV = "dev", "built-in engine"  # the platform's own tool-calling loop over the coding tools


class RepoScheme(models.TextChoices):
    """The URL schemes a repository's `cloneUrl` may use (POST /v1/agents/repos)."""

    HTTPS = "https", "https"  # a public host over HTTPS
    SSH = "ssh", "ssh"  # ssh://host/path or scp-like user@host:path
    FILE = "file", "file"  # a local repository under AGENTS_REPO_FILE_ROOTS (local set-ups, tests)


class ControlCommand(models.TextChoices):
    """A steering command recorded as a `control` event (spec 003: POST …/{id}/{command})."""

    PAUSE = wire.ControlCommand.PAUSE.value, "pause"  # hold before the next step
    RESUME = wire.ControlCommand.RESUME.value, "resume"  # carry on after a pause
    STOP = wire.ControlCommand.STOP.value, "stop"  # end the run for good
    MESSAGE = wire.ControlCommand.MESSAGE.value, "message"  # add a user turn before the next step
    APPROVE = wire.ControlCommand.APPROVE.value, "approve"  # approve a pending tool call (its own route: POST …/{id}/approve)
    DENY = wire.ControlCommand.DENY.value, "deny"  # deny a pending tool call; the model gets the reason (POST …/{id}/deny)


#: The commands POST …/{id}/{pause|resume|stop|message} record through `control_send`.
ControlCommand.STEERING = frozenset({ControlCommand.PAUSE, ControlCommand.RESUME, ControlCommand.STOP, ControlCommand.MESSAGE})
#: The answers to an approval request (POST …/{id}/approve, …/deny).
ControlCommand.ANSWERS = frozenset({ControlCommand.APPROVE, ControlCommand.DENY})


class ApprovalState(models.TextChoices):
    """Where one tool call of a waiting run stands (`runs.models.Approval`)."""

    PENDING = "pending", "pending"  # asked; nobody answered yet
    WAITING = "waiting", "waits with the others"  # needs no approval; executes once every call of its turn is answered
    APPROVED = "approved", "approved"  # approved; executes when the run resumes
    DENIED = "denied", "denied"  # denied; the model receives the denial as the tool's result
    STARTED = "started", "started"  # the resumed run took it and the tool started (never started twice)
    DONE = "done", "done"  # the tool answered (or the denial was handed to the model)
    INTERRUPTED = "interrupted", "interrupted, not re-run"  # started and lost with its worker: never executed again
    EXPIRED = "expired", "expired"  # unanswered for AGENTS_APPROVAL_TIMEOUT_SECONDS: the run ended
    CANCELLED = "cancelled", "cancelled"  # the run was stopped while it waited


ApprovalState.OPEN = frozenset({ApprovalState.PENDING})
ApprovalState.DECIDED = frozenset({ApprovalState.APPROVED, ApprovalState.DENIED})


class ApprovalOutcome(models.TextChoices):
    """How one approval request ended, as a person reads it (an approval's `outcome`; issue 57).

    The decision survives the call's later states (`started`, `done`): a request approved and
    then executed still reads "approved", a denied one "denied".
    """

    APPROVED = "approved", "approved"  # approved as the model asked
    EDITED = "edited", "approved with edited arguments"  # approved after the approver changed the arguments
    DENIED = "denied", "denied"  # denied; the model got the reason
    TIMED_OUT = "timed out", "timed out"  # nobody answered within AGENTS_APPROVAL_TIMEOUT_SECONDS
    STOPPED = "stopped", "stopped"  # the run was stopped while the request waited (a user's stop: not a failure)


class ReplyFrame(models.TextChoices):
    """The kind of one frame of a streamed reply (`stream: true` on POST …/{ref}/run and POST /v1/agents/chat)."""

    START = "start", "start"  # first: the run's ids (runId, sessionId, conversationId) so a client can stop it
    DELTA = "delta", "delta"  # a piece of the reply as it is written (masked)
    TOOL = "tool", "tool"  # a tool call executed on the server: {name, args, result|error}
    OPS = "ops", "ops"  # tool calls handed back for the client to run: {"ops": [{name, args}]}
    RUN = "run", "run"  # last, on POST …/run: the recorded run
    APPROVAL = "approval", "approval"  # last, when the run waits for approval: the run with its `approvals`
    CHAT = "chat", "chat"  # last, on POST /v1/agents/chat: the round's 200 body plus the run
    ERROR = "error", "error"  # last, when the round failed or the worker did: the error body


class ShareSubject(models.TextChoices):
    """What a share link shows (POST /v1/agents/chat/conversations/{id}/shares, /v1/agents/sessions/{id}/shares)."""

    CONVERSATION = "conversation", "conversation"  # a chat conversation's turns
    SESSION = "session", "session"  # a session's turns (no control or log events)


class ShareState(models.TextChoices):
    """Where a share link stands (its `state` in the lists; its reader only ever sees a page or a 404)."""

    ACTIVE = "active", "active"  # anyone holding the link reads the turns
    REVOKED = "revoked", "revoked"  # revoked: reading it is a 404 at once
    EXPIRED = "expired", "expired"  # past its expiry: reading it is a 404


class StreamFrameKind(models.TextChoices):
    """The kind of one frame of the live session stream (spec 003: GET …/sessions/stream)."""

    SESSION = "session", "session"  # a session was registered or updated
    EVENT = "event", "event"  # one turn was appended to a session's log
    RESET = "reset", "reset"  # the Last-Event-ID is beyond the log's head; the stream goes on from the head
    DELTA = "delta", "delta"  # a piece of a reply being written (ephemeral: no id, never stored or replayed)
    EVENTS = "events", "events"  # bus only: the event frames of one batch append; the stream sends each as `event`


class SecretSeverity(models.TextChoices):
    """How bad a credential found in a transcript is (reference §4); findings sort by it."""

    CRITICAL = "critical", "critical"  # grants broad access on its own (private key, cloud root key)
    HIGH = "high", "high"  # a scoped token for a service (GitHub, Slack, npm)
    MEDIUM = "medium", "medium"  # a likely secret recognised by shape or keyword
    LOW = "low", "low"  # weak evidence


SecretSeverity.RANK = {SecretSeverity.CRITICAL: 0, SecretSeverity.HIGH: 1, SecretSeverity.MEDIUM: 2, SecretSeverity.LOW: 3}


class TargetKind(models.TextChoices):
    """The kind of a registered machine (spec 003: POST /v1/agents/targets)."""

    LAPTOP = wire.TargetKind.LAPTOP.value, "laptop"
    CLOUD = wire.TargetKind.CLOUD.value, "cloud"
    GPU = wire.TargetKind.GPU.value, "gpu"
    CLUSTER = wire.TargetKind.CLUSTER.value, "cluster"
    MACHINE = wire.TargetKind.MACHINE.value, "machine"


class MachineSandbox(models.TextChoices):
    """How a machine's runner confines a routed coding run's commands (`spec.sandbox`)."""

    BUBBLEWRAP = wire.MachineSandbox.BUBBLEWRAP.value, "bubblewrap"  # in bubblewrap, like the server
    NONE = wire.MachineSandbox.NONE.value, "none"  # unconfined: the owner started the runner with --allow-unsandboxed-commands
    UNAVAILABLE = wire.MachineSandbox.UNAVAILABLE.value, "unavailable"  # no sandbox: the `run` tool is refused there


class TargetStatus(models.TextChoices):
    """A machine's status: stored as operator intent, answered as effective status."""

    ONLINE = "online", "online"  # accepting work
    OFFLINE = "offline", "offline"  # not accepting work (or no heartbeat for 90 s)
    DRAINING = "draining", "draining"  # finishing what it has, taking nothing new


class RoutedRunState(models.TextChoices):
    """Where one offer of the (org, target) mailbox stands (targets.models.RoutedRun)."""

    OFFERED = "offered", "offered"  # waiting for the machine's claim
    CLAIMED = "claimed", "claimed"  # won by exactly one claim; the machine is running it
    WAITING = "waiting", "waiting for approval"  # the machine asked a person (issue 28): no claim held; answered → offered again
    REPORTED = "reported", "reported"  # the machine reported its result (terminal)
    WITHDRAWN = "withdrawn", "withdrawn"  # the run was stopped or the target removed (terminal)


RoutedRunState.OPEN = frozenset({RoutedRunState.OFFERED, RoutedRunState.CLAIMED, RoutedRunState.WAITING})


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


class IdentityCategory(models.TextChoices):
    """What kind of identity agent it is (spec 001: the creation form's `category`)."""

    ASSISTANT = "assistant", "assistant"  # a general helper people talk to
    TOOL = "tool", "tool"  # does one job when asked
    BOT = "bot", "bot"  # automated account (notifications, feeds)
    INTEGRATION = "integration", "integration"  # a bridge to another system


class ConnectionMode(models.TextChoices):
    """How an identity agent receives its envelopes (spec 001: `connection_mode`)."""

    WEBSOCKET = "websocket", "WebSocket"  # connects to /v1/identity/ws with its token
    WEBHOOK = "webhook", "webhook"  # envelopes are POSTed to its webhook_url, signed


class RelationStatus(models.TextChoices):
    """The state of a human-to-agent relation (H2A, spec 001)."""

    ACTIVE = "active", "active"  # the user added the agent; messages may flow both ways
    REMOVED = "removed", "removed"  # the user removed the agent (terminal)
    TERMINATED_BY_DELETION = "terminated_by_deletion", "terminated by deletion"  # the agent was deleted (terminal)


class KeyStatus(models.TextChoices):
    """Where a registered key set (an agent's or a user's) stands; envelopes go only to CURRENT or GRACE keys."""

    CURRENT = "current", "current"  # the newest registered set: seal to it
    GRACE = "grace", "in grace"  # superseded by a normal rotation; still opens and verifies until expires_at
    EXPIRED = "expired", "expired"  # its grace period is over
    REVOKED = "revoked", "revoked"  # revoked at once (emergency rotation, re-registration, delete): refuse what it signed


KeyStatus.VALID = frozenset({KeyStatus.CURRENT, KeyStatus.GRACE})


class EnvelopeParty(models.TextChoices):
    """Who is at one end of an envelope (`from`/`to` type of docs/envelopes.md)."""

    USER = "user", "user"  # a person, by their principal's subject
    AGENT = "agent", "agent"  # an identity agent, by its agent_id


class EnvelopeDirection(models.TextChoices):
    """Which way an opaque envelope travels through the blind pipe."""

    TO_AGENT = "to_agent", "user to agent"  # delivered by webhook or WebSocket
    TO_USER = "to_user", "agent to user"  # lands in the user's inbox


class DeliveryStatus(models.TextChoices):
    """Where one webhook delivery of an envelope stands."""

    PENDING = "pending", "pending"  # queued, first attempt not made yet
    RETRYING = "retrying", "retrying"  # an attempt failed; the next one is due at next_attempt_at
    SUCCEEDED = "succeeded", "succeeded"  # the receiver answered 2xx (terminal)
    DEAD = "dead", "dead-lettered"  # every attempt failed; kept for replay (terminal)
    CANCELLED = "cancelled", "cancelled"  # the agent was deleted before delivery (terminal)


DeliveryStatus.OPEN = frozenset({DeliveryStatus.PENDING, DeliveryStatus.RETRYING})
DeliveryStatus.TERMINAL = frozenset({DeliveryStatus.SUCCEEDED, DeliveryStatus.DEAD, DeliveryStatus.CANCELLED})


class WsFrameType(models.TextChoices):
    """The `type` of one JSON frame of the identity agents' WebSocket (/v1/identity/ws, `identity.consumers`)."""

    ENVELOPE = "envelope", "envelope"  # server → agent: an unacknowledged envelope (backlog, then live)
    ACK = "ack", "ack"  # agent → server: these envelope ids were received
    ACKED = "acked", "acked"  # server → agent: how many envelopes the ack acknowledged
    MESSAGE = "message", "message"  # agent → server: an envelope for a user
    SENT = "sent", "sent"  # server → agent: the message's envelope is in the user's inbox
    ERROR = "error", "error"  # server → agent: the frame was refused ({status, code, error}); the connection stays
    SECURITY_ALERT = "security_alert", "security alert"  # server → agent: a system message (SystemMessageType's word)


class InboxStreamFrame(models.TextChoices):
    """The `event` of one frame of a user's identity inbox stream (GET /v1/identity/inbox/stream)."""

    INBOX = "inbox", "inbox"  # one inbox item (an envelope or a system message), with its id


#: The frame types an agent may send; anything else is answered with an error frame.
WsFrameType.FROM_AGENT = frozenset({WsFrameType.ACK, WsFrameType.MESSAGE})


class InboxItemKind(models.TextChoices):
    """What one item of a user's identity inbox is."""

    ENVELOPE = "envelope", "envelope"  # an opaque envelope an agent sent the user
    SYSTEM = "system", "system message"  # a platform notification (e.g. a security alert)


class SystemMessageType(models.TextChoices):
    """The type of a platform system message in a user's inbox or on an agent's WebSocket."""

    SECURITY_ALERT = "security_alert", "security alert"  # something changed that affects the user's safety


class SystemMessageCode(models.TextChoices):
    """What a system message reports (spec 001)."""

    AGENT_DELETED_BY_CREATOR = "agent.deleted_by_creator", "agent deleted by its creator"  # relation terminated by a cascade delete
    AGENT_KEYS_REVOKED = "agent.keys_revoked", "agent keys revoked"  # an emergency rotation revoked the agent's token and keys at once
    AGENT_TOKEN_ROTATED = "agent.token_rotated", "agent token rotated"  # (to the agent) a normal rotation: the old token and keys end after the grace period
    AGENT_TOKEN_REVOKED = "agent.token_revoked", "agent token revoked"  # (to the agent) its connection's token was revoked: the socket closes now


class AgentHealth(models.TextChoices):
    """The last health probe of an identity agent's health_check_url."""

    UNKNOWN = "unknown", "unknown"  # no URL, or not probed yet
    HEALTHY = "healthy", "healthy"  # answered 2xx
    UNHEALTHY = "unhealthy", "unhealthy"  # answered otherwise, timed out or was refused


class WebhookEventType(models.TextChoices):
    """The `type` of a webhook body: to an identity agent, or to an org's webhook endpoints (issue 32)."""

    ENVELOPE = "envelope.created", "envelope created"  # (identity agent) a user sent the agent an envelope
    SECURITY_ALERT = "security_alert", "security alert"  # (identity agent) a system message: rotation, revocation
    RUN_FINISHED = "run.finished", "run finished"  # a run of any kind ended (ok or error); data is the run record
    RUN_WAITING = "run.waiting", "run waiting"  # a run suspended to wait for approval; data is the run with its approvals
    CODING_PUSHED = "coding.pushed", "coding pushed"  # a coding run pushed its branch
    SESSION_PUBLISHED = "session.published", "session published"  # a session became public
    TARGET_OFFLINE = "target.offline", "target status changed"  # a machine's computed status changed (sweep)
    BALANCE_LOW = "balance.low", "balance low"  # the org's balance fell below AGENTS_WEBHOOK_BALANCE_LOW_CENTS
    TEST = "webhook.test", "test"  # a test send from the console or POST …/webhooks/{id}/test
    RESPONSE_COMPLETED = "response.completed", "response completed"  # a Responses API response completed; data is the response
    RESPONSE_FAILED = "response.failed", "response failed"  # a response failed (its run ended error, not by a stop)
    RESPONSE_CANCELLED = "response.cancelled", "response cancelled"  # a response was cancelled (its run was stopped)
    RESPONSE_INCOMPLETE = "response.incomplete", "response incomplete"  # a response's reply was cut (max_output_tokens)


#: The events an org webhook endpoint may subscribe to (`events` of POST /v1/agents/webhooks).
WebhookEventType.SUBSCRIBABLE = frozenset({
    WebhookEventType.RUN_FINISHED, WebhookEventType.RUN_WAITING, WebhookEventType.CODING_PUSHED,
    WebhookEventType.SESSION_PUBLISHED, WebhookEventType.TARGET_OFFLINE, WebhookEventType.BALANCE_LOW,
    WebhookEventType.RESPONSE_COMPLETED, WebhookEventType.RESPONSE_FAILED, WebhookEventType.RESPONSE_CANCELLED,
    WebhookEventType.RESPONSE_INCOMPLETE,
})


class WebhookChannel(models.TextChoices):
    """Which kind of endpoint a delivery of the shared webhook engine goes to (`webhooks.engine`)."""

    IDENTITY = "identity", "identity agent"  # an identity agent's webhook_url, signed with its registered secret
    ORG = "org", "org endpoint"  # an org webhook endpoint (or a per-request callback under it), signed with its secret


class WebhookDisabledReason(models.TextChoices):
    """Why an org webhook endpoint is not delivered to."""

    NONE = "", "enabled or disabled by hand"
    FAILING = "failing", "failing for 24 hours"  # every attempt failed for AGENTS_WEBHOOK_DISABLE_AFTER_SECONDS
    GONE = "gone", "the receiver answered 410 Gone"  # at once, its open deliveries dead (issue 52)


class MsgSubtype(models.TextChoices):
    """The message subtype of an artifact the system agent and a client exchange (spec 001)."""

    ARTIFACT_FORM = "artifact_form", "artifact form"  # system agent → client: a form or card to show
    ARTIFACT_RESPONSE = "artifact_response", "artifact response"  # client → system agent: what the client did


class ArtifactSubtype(models.TextChoices):
    """`artifact.subtype` of guided creation (spec 001 table); FORMS go to the client, RESPONSES come back."""

    AGENT_CREATION_FORM = "agent_creation_form", "agent creation form"  # the user fills in a new agent
    AGENT_CREATED = "agent_created", "agent created"  # the client created it (agent_id, display_name)
    AGENT_UPDATE_FORM = "agent_update_form", "agent update form"  # the user changes an agent
    AGENT_UPDATED = "agent_updated", "agent updated"  # the client changed it
    AGENT_DELETION_CONFIRM = "agent_deletion_confirm", "agent deletion confirm"  # confirm a delete, with the cascade preview
    AGENT_DELETED = "agent_deleted", "agent deleted"  # the client deleted it
    AGENT_TOKEN_ROTATE_CONFIRM = "agent_token_rotate_confirm", "agent token rotate confirm"  # confirm a token rotation
    AGENT_TOKEN_ROTATED = "agent_token_rotated", "agent token rotated"  # the client rotated it
    AGENT_LIST_DISPLAY = "agent_list_display", "agent list display"  # the user's agents, shown as a card


ArtifactSubtype.FORMS = frozenset({
    ArtifactSubtype.AGENT_CREATION_FORM, ArtifactSubtype.AGENT_UPDATE_FORM, ArtifactSubtype.AGENT_DELETION_CONFIRM,
    ArtifactSubtype.AGENT_TOKEN_ROTATE_CONFIRM, ArtifactSubtype.AGENT_LIST_DISPLAY,
})
ArtifactSubtype.RESPONSES = frozenset({
    ArtifactSubtype.AGENT_CREATED, ArtifactSubtype.AGENT_UPDATED, ArtifactSubtype.AGENT_DELETED, ArtifactSubtype.AGENT_TOKEN_ROTATED,
})


class SystemCommand(models.TextChoices):
    """The slash commands the system agent answers without a model (spec 001 acceptance list)."""

    CREATE_AGENT = "/create-agent", "create an agent"  # → agent_creation_form
    LIST_AGENTS = "/list-agents", "list your agents"  # → agent_list_display
    UPDATE_AGENT = "/update-agent", "change an agent"  # → agent_update_form
    DELETE_AGENT = "/delete-agent", "delete an agent"  # → agent_deletion_confirm with the cascade preview
    ROTATE_TOKEN = "/rotate-token", "rotate an agent's token"  # → agent_token_rotate_confirm
    HELP = "/help", "what the system agent can do"  # the list of commands


class ClientAuth(models.TextChoices):
    """Which credential a client_action may use (spec 001 security model); anything else is refused."""

    USER_JWT = "user_jwt", "the user's own credential"  # the console session or the user's API key / JWT
    AGENT_TOKEN = "agent_token", "the new agent's token"  # agt_… from the previous step's response


class AnomalyKind(models.TextChoices):
    """What a client refused in an artifact form and reported (POST /v1/identity/anomalies)."""

    ENDPOINT_NOT_ALLOWED = "endpoint_not_allowed", "endpoint not on the allow-list"  # ignored silently, reported
    AUTH_REFUSED = "auth_refused", "auth not user_jwt/agent_token"  # the action was refused
    JSONPATH_REFUSED = "jsonpath_refused", "params_from_response not $.field"  # the action was refused
    FIELD_REFUSED = "field_refused", "reply field forbidden or not allowed"  # the reply asked for a secret
    PARAM_REFUSED = "param_refused", "path parameter not an id"  # a :param value could escape its path segment


class PrincipalVia(models.TextChoices):
    """How a principal proved who it is."""

    API_KEY = "api_key", "API key"
    JWT = "jwt", "gateway JWT"
    SESSION = "session", "session login"


class Role(StrEnum):
    """Who calls a route, as the permission table (`agents_site.permissions`) tells principals apart."""

    ANONYMOUS = "anonymous"  # no credential at all
    MEMBER = "member"  # a plain member of the org (console login, API key of scope all, gateway JWT)
    ADMIN = "admin"  # an admin of the org
    OTHER_ORG = "other org"  # a member or admin of another org (its objects are not this org's)
    SCOPED_KEY = "scoped key"  # an API key of a limited scope (`ApiKeyScope.OPENAI`)
    AGENT_TOKEN = "agent token"  # an identity agent's `agt_…` token
    MACHINE_KEY = "machine key"  # a target's claim key (`X-Target-Key`) and nothing else


class Access(StrEnum):
    """What the permission table answers a role on a route."""

    ALLOW = "allow"  # served
    OWN = "own"  # served for what the principal started or owns; anything else is refused as the row says
    UNAUTHENTICATED = "401"  # refused: 401, OpenAI's authentication error (the OpenAI-compatible endpoint only)
    FORBIDDEN = "403"  # refused: 403 `forbidden` (it may know the route exists, not use it)
    NOT_FOUND = "404"  # refused: 404 `not_found`, exactly like an unknown id
    LOGIN = "login"  # a page: redirected to the sign-in page


class ApiKeyScope(models.TextChoices):
    """Which API paths an API key may call (`tenancy.ApiKey.scope`)."""

    ALL = "all", "every API path"  # the whole API, as its user
    OPENAI = "openai", "OpenAI-compatible endpoint only"  # only /v1/agents/openai/…; 403 elsewhere
    MCP = "mcp", "MCP server only"  # only /v1/agents/mcp; 403 elsewhere


class OpenAIErrorType(StrEnum):
    """The `type` of an OpenAI error object (the OpenAI-compatible endpoint's errors only)."""

    INVALID_REQUEST = "invalid_request_error"  # 400, 404, 409, 413, 422: the request cannot be served as sent
    AUTHENTICATION = "authentication_error"  # 401: no API key, or an unknown or revoked one
    PERMISSION = "permission_error"  # 403: the key may not do this
    INSUFFICIENT_QUOTA = "insufficient_quota"  # 402: the org's balance cannot pay for the call
    RATE_LIMIT = "rate_limit_error"  # 429: too many requests
    API = "api_error"  # 5xx: the run failed, or a dependency did not answer


class ResponseStatus(StrEnum):
    """The `status` of an OpenAI Responses API `response` (derived from its run's status and finish reason)."""

    QUEUED = "queued"  # a background response accepted, its run not yet taken by a worker
    IN_PROGRESS = "in_progress"  # its run is executing
    COMPLETED = "completed"  # its run ended ok
    FAILED = "failed"  # its run ended error (not by a stop)
    CANCELLED = "cancelled"  # its run was stopped (POST …/responses/{id}/cancel, or the session's stop)
    INCOMPLETE = "incomplete"  # its run ended ok but the reply was cut (max_output_tokens, content filter)


ResponseStatus.TERMINAL = frozenset({ResponseStatus.COMPLETED, ResponseStatus.FAILED, ResponseStatus.CANCELLED,
                                     ResponseStatus.INCOMPLETE})


class OpenAIFinishReason(StrEnum):
    """Why a chat completion ended (`choices[].finish_reason`)."""

    STOP = "stop"  # the agent answered
    TOOL_CALLS = "tool_calls"  # the agent called tools the caller executes (`tool_calls`)
    LENGTH = "length"  # the gateway cut the reply at the token limit (max_tokens)
    CONTENT_FILTER = "content_filter"  # the gateway's content filter cut the reply


class ErrorCode(StrEnum):
    """Every error code an error body can carry (`{"status", "code", "error"}`)."""

    INVALID_REQUEST = "invalid_request"  # the body, query or path failed validation
    PAYLOAD_TOO_LARGE = "payload_too_large"  # the request body exceeds the upload limit
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"  # a body that is not JSON on a JSON route (415)
    FORBIDDEN = "forbidden"  # no validated principal, no org, or a bad credential
    NOT_FOUND = "not_found"  # unknown, or another org's (never told apart)
    CONFLICT = "conflict"  # the write collides with what is stored
    AGENT_EXISTS = "agent_exists"  # an agent of that name already exists in the org
    LONG_RUNNING_LIMIT = "long_running_limit"  # the org's cap on scheduled agents is reached
    SESSION_FINISHED = "session_finished"  # the session is done/error and cannot change
    SECRET_IN_TRANSCRIPT = "secret_in_transcript"  # a credential was found; nothing stored
    CONTEXT_LENGTH_EXCEEDED = "context_length_exceeded"  # the prompt is over the model's context window (the gateway said so; 400)
    GATEWAY_REFUSED = "gateway_refused"  # the gateway refused a field the caller sent (OpenAI-compatible endpoint: 400, `param` names it)
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
    STORE_UNAVAILABLE = "store_unavailable"  # the org's store cannot take the request (read-only, full, being restored)
    ENVELOPE_KEY_UNKNOWN = "envelope_key_unknown"  # the envelope is sealed to (or signed with) a key that is not a current or in-grace key of its party
    ENVELOPE_REPLAYED = "envelope_replayed"  # an envelope with this (sender, message id) was already accepted
    AGENT_LIMIT_EXCEEDED = "agent_limit_exceeded"  # the user's identity-agent quota is used up (spec 001 AGT_008)
    RATE_LIMITED = "rate_limited"  # too many requests of this kind from this caller; retry later
    ROTATION_LIMIT = "rotation_limit"  # the agent's token was rotated 5 times in 24 h already
    REPO_EXISTS = "repo_exists"  # a repository of that owner/name is already registered in the org
    SANDBOX_UNAVAILABLE = "sandbox_unavailable"  # no sandbox for commands: coding runs refused, never unconfined
    CODING_BUSY = "coding_busy"  # the org has AGENTS_CODING_MAX_CONCURRENT coding runs in flight
    BASE_NOT_FOUND = "base_not_found"  # a coding run's start branch does not exist in the repo's remote
    APPROVAL_PENDING = "approval_pending"  # the session's run waits for an approval: answer it (approve/deny) or stop
    APPROVAL_ANSWERED = "approval_answered"  # the approval request was already answered (or its run ended)
    INVALID_ARGUMENTS = "invalid_arguments"  # edited tool-call arguments do not fit the tool's schema (422)
    APPROVAL_UNSUPPORTED = "approval_unsupported"  # the agent has approval rules this surface cannot honour (coding, OpenAI-compatible)
    CONVERSATION_BUSY = "conversation_busy"  # a round of this conversation is in flight (multitaskStrategy)
    RUN_FAILED = "run_failed"  # the run executed and failed; the body names its run (502: runId on /v1/agents, run_id in the OpenAI error object)
    INVALID_API_KEY = "invalid_api_key"  # OpenAI-compatible endpoint: no API key, or an unknown or revoked one (401)
    MODEL_NOT_FOUND = "model_not_found"  # OpenAI-compatible endpoint: no agent of that name or id the key may use
    MANIFEST_INVALID = "manifest_invalid"  # a capability manifest's schema, extension or signature is wrong (400, `field` names it)
    INTERNAL = "internal_error"  # an unexpected fault; nothing half-written


class StoreCondition(StrEnum):
    """Why a store answered 503 `store_unavailable` (the body's `condition`)."""

    READ_ONLY = "read_only"  # the database file or server refuses writes
    FULL = "full"  # the database reached its size limit or its disk is full
    RESTORING = "restoring"  # the org's store is being restored from its backup (manage.py restore_org)


class InvitationState(models.TextChoices):
    """Where an invitation to join an org stands (tenancy.Invitation)."""

    PENDING = "pending", "pending"  # the link works: the next signed-in user to accept it joins
    ACCEPTED = "accepted", "accepted"  # used once; it lets nobody else in
    REVOKED = "revoked", "revoked"  # withdrawn by an admin before anyone used it
    EXPIRED = "expired", "expired"  # not used before its expiry


class MemberRole(models.TextChoices):
    """A member's role in an org (tenancy.Membership.is_admin)."""

    MEMBER = "member", "member"  # uses the org's agents, sessions and machines
    ADMIN = "admin", "admin"  # also manages members, API keys, billing and the org's admin pages


class ReplicaGenerationEnd(models.TextChoices):
    """Why an org's replica generation stopped receiving changes (tenancy.ReplicaGeneration)."""

    RESTORED = "restored", "restored"  # the org was restored to a moment: a new generation carries on
    REMOVED = "removed", "removed"  # the org was removed: its replica is kept for the retention period
    MOVED = "moved", "moved"  # AGENTS_BACKUP_URL changed: a new generation carries on at the new replica


class RestoreStatus(models.TextChoices):
    """The state of one restore of an org's store (tenancy.OrgRestore)."""

    RUNNING = "running", "running"  # the org answers 503 store_unavailable (condition restoring)
    DONE = "done", "done"  # the org is back with the data of the moment
    FAILED = "failed", "failed"  # nothing was changed; `error` names the cause


class BackupState(StrEnum):
    """Where an org's backup stands (`manage.py backup_status`, the admin, the console's Backups page)."""

    REPLICATING = "replicating"  # Litestream ships its file now; the lag says how far behind
    NOT_REPLICATING = "not replicating"  # a replica exists, but `manage.py replicate` does not ship it now
    RESTORING = "restoring"  # restore_org is replacing its store
    NO_BACKUP = "no backup"  # no replica (or, in PostgreSQL mode, no dump) yet
    UNREACHABLE = "unreachable"  # its replica cannot be read; the detail names the cause
    OFF = "off"  # AGENTS_BACKUP_URL is not set
    DUMPED = "dumped"  # PostgreSQL mode: its newest pg_dump (lag = its age)


# Badge colours used by the console for each status word (CSS colour names).
BADGE_COLOURS = {
    RunStatus.QUEUED: "#6b7280",
    RunStatus.RUNNING: "#2563eb",
    RunStatus.WAITING: "#b45309",
    RunStatus.OK: "#15803d",
    RunStatus.ERROR: "#b91c1c",
    FinishReason.STOPPED: "#6b7280",  # a user's stop is not a failure: neutral grey
    ApprovalOutcome.APPROVED: "#15803d",
    ApprovalOutcome.EDITED: "#2563eb",
    ApprovalOutcome.DENIED: "#b91c1c",
    ApprovalOutcome.TIMED_OUT: "#b45309",
    ShareState.ACTIVE: "#15803d",
    ShareState.REVOKED: "#6b7280",
    ShareState.EXPIRED: "#6b7280",
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
    AgentHealth.HEALTHY: "#15803d",
    AgentHealth.UNHEALTHY: "#b91c1c",
    AgentHealth.UNKNOWN: "#6b7280",
    DeliveryStatus.PENDING: "#6b7280",
    DeliveryStatus.RETRYING: "#b45309",
    DeliveryStatus.SUCCEEDED: "#15803d",
    DeliveryStatus.DEAD: "#b91c1c",
    DeliveryStatus.CANCELLED: "#6b7280",
    KeyStatus.CURRENT: "#15803d",
    KeyStatus.GRACE: "#b45309",
    KeyStatus.REVOKED: "#b91c1c",
    BackupState.REPLICATING: "#15803d",
    BackupState.NOT_REPLICATING: "#b45309",
    BackupState.RESTORING: "#b45309",
    BackupState.NO_BACKUP: "#b91c1c",
    BackupState.UNREACHABLE: "#b91c1c",
    BackupState.OFF: "#6b7280",
    BackupState.DUMPED: "#15803d",
}


def vocabulary_for_js() -> dict:
    """Return the vocabulary as plain JSON-able data for templates (`json_script`).

    Output: `{"runStatus": [...], "runKind": [...], "sessionStatus": [...], "sessionTerminal": [...],
    "eventKind": [...], "eventKindAppendable": [...], "approvalState": [...], "controlCommand": [...], "targetKind": [...], "targetStatus": [...],
    "activityKind": [...], "metricsRange": [...], "msgSubtype": [...], "artifactSubtype": [...], "clientAuth": [...],
    "anomalyKind": [...], "keyStatus": [...], "envelopeParty": [...], "systemMessageCode": [...], "deliveryTerminal": [...],
    "badge": {word: colour}, "word": {name: word}, "enums": {EnumName: {MEMBER: word}}}`.
    """
    return {
        "runStatus": list(RunStatus.values),
        "runKind": list(RunKind.values),
        "sessionStatus": list(SessionStatus.values),
        "sessionTerminal": sorted(SessionStatus.TERMINAL),
        "eventKind": list(EventKind.values),
        "eventKindAppendable": list(EventKind.APPENDABLE),
        "approvalState": list(ApprovalState.values),
        "controlCommand": list(ControlCommand.values),
        "targetKind": list(TargetKind.values),
        "targetStatus": list(TargetStatus.values),
        "activityKind": list(ActivityKind.values),
        "metricsRange": list(MetricsRange.values),
        "msgSubtype": list(MsgSubtype.values),
        "artifactSubtype": list(ArtifactSubtype.values),
        "clientAuth": list(ClientAuth.values),
        "anomalyKind": list(AnomalyKind.values),
        "keyStatus": list(KeyStatus.values),
        "envelopeParty": list(EnvelopeParty.values),
        "systemMessageCode": list(SystemMessageCode.values),
        "deliveryTerminal": sorted(DeliveryStatus.TERMINAL),
        "badge": {str(k): v for k, v in BADGE_COLOURS.items()},
        # Single words the scripts compare against, named (never a copied literal in JS).
        "word": {"toolCall": str(EventKind.TOOL_CALL), "commit": str(EventKind.COMMIT), "runError": str(RunStatus.ERROR), "sessionError": str(SessionStatus.ERROR), "external": str(AgentHosting.EXTERNAL),
                 "truncated": str(FinishReason.LENGTH), "stopped": str(FinishReason.STOPPED),
                 "approval": str(EventKind.APPROVAL), "pending": str(ApprovalState.PENDING), "waiting": str(RunStatus.WAITING)},
        # Every enum of this module by member name, e.g. `enums.ReplyFrame.DELTA == "delta"`.
        "enums": {name: {member.name: str(member.value) for member in enum} for name, enum in _enums().items()},
    }


def _enums() -> dict[str, type]:
    """Return every vocabulary enum of this module by class name, in definition order."""
    return {name: value for name, value in globals().items()
            if isinstance(value, type) and issubclass(value, models.Choices | StrEnum) and value.__module__ == __name__}


#: Where `vocabulary_js()` is committed (served as `console/vocabulary.js`), relative to the checkout.
VOCABULARY_JS_PATH = "static/console/vocabulary.js"


def vocabulary_js() -> str:
    """Return the text of the console's one vocabulary module (`static/console/vocabulary.js`).

    Generated from `vocabulary_for_js()` by `manage.py write_vocabulary_js`; the console's
    scripts read `window.AgentsVocabulary` and spell no word of their own.
    tests/console/test_vocabulary_js.py fails when the committed file differs from this text.
    """
    body = json.dumps(vocabulary_for_js(), indent=1, sort_keys=True, ensure_ascii=False)
    return ("/* Generated from agents_site/vocabulary.py by `python manage.py write_vocabulary_js`: do not edit.\n"
            "   The console's one vocabulary; tests/console/test_vocabulary_js.py fails when this file is stale. */\n"
            f"window.AgentsVocabulary = Object.freeze({body});\n")
