/* Generated from agents_site/vocabulary.py by `python manage.py write_vocabulary_js`: do not edit.
   The console's one vocabulary; tests/console/test_vocabulary_js.py fails when this file is stale. */
window.AgentsVocabulary = Object.freeze({
 "activityKind": [
  "invoked",
  "failed",
  "created",
  "updated"
 ],
 "anomalyKind": [
  "endpoint_not_allowed",
  "auth_refused",
  "jsonpath_refused",
  "field_refused",
  "param_refused"
 ],
 "approvalState": [
  "pending",
  "waiting",
  "approved",
  "denied",
  "started",
  "done",
  "interrupted",
  "expired",
  "cancelled"
 ],
 "artifactSubtype": [
  "agent_creation_form",
  "agent_created",
  "agent_update_form",
  "agent_updated",
  "agent_deletion_confirm",
  "agent_deleted",
  "agent_token_rotate_confirm",
  "agent_token_rotated",
  "agent_list_display"
 ],
 "badge": {
  "active": "#15803d",
  "approved": "#15803d",
  "cancelled": "#6b7280",
  "created": "#2563eb",
  "current": "#15803d",
  "dead": "#b91c1c",
  "denied": "#b91c1c",
  "done": "#15803d",
  "draining": "#b45309",
  "dumped": "#15803d",
  "edited": "#2563eb",
  "error": "#b91c1c",
  "expired": "#6b7280",
  "failed": "#b91c1c",
  "grace": "#b45309",
  "healthy": "#15803d",
  "invoked": "#15803d",
  "no backup": "#b91c1c",
  "not replicating": "#b45309",
  "off": "#6b7280",
  "offline": "#6b7280",
  "ok": "#15803d",
  "online": "#15803d",
  "paused": "#b45309",
  "pending": "#6b7280",
  "queued": "#6b7280",
  "ready": "#15803d",
  "replicating": "#15803d",
  "restoring": "#b45309",
  "retrying": "#b45309",
  "revoked": "#b91c1c",
  "running": "#2563eb",
  "stopped": "#6b7280",
  "succeeded": "#15803d",
  "timed out": "#b45309",
  "unhealthy": "#b91c1c",
  "unknown": "#6b7280",
  "unreachable": "#b91c1c",
  "updated": "#6b7280",
  "waiting": "#b45309"
 },
 "clientAuth": [
  "user_jwt",
  "agent_token"
 ],
 "controlCommand": [
  "pause",
  "resume",
  "stop",
  "message",
  "approve",
  "deny"
 ],
 "deliveryTerminal": [
  "cancelled",
  "dead",
  "succeeded"
 ],
 "enums": {
  "Access": {
   "ALLOW": "allow",
   "FORBIDDEN": "403",
   "LOGIN": "login",
   "NOT_FOUND": "404",
   "OWN": "own",
   "UNAUTHENTICATED": "401"
  },
  "ActivityKind": {
   "CREATED": "created",
   "FAILED": "failed",
   "INVOKED": "invoked",
   "UPDATED": "updated"
  },
  "AgentHealth": {
   "HEALTHY": "healthy",
   "UNHEALTHY": "unhealthy",
   "UNKNOWN": "unknown"
  },
  "AgentHosting": {
   "EXTERNAL": "external",
   "PLATFORM": "platform"
  },
  "AgentStatus": {
   "READY": "ready"
  },
  "AnomalyKind": {
   "AUTH_REFUSED": "auth_refused",
   "ENDPOINT_NOT_ALLOWED": "endpoint_not_allowed",
   "FIELD_REFUSED": "field_refused",
   "JSONPATH_REFUSED": "jsonpath_refused",
   "PARAM_REFUSED": "param_refused"
  },
  "ApiKeyScope": {
   "ALL": "all",
   "MCP": "mcp",
   "OPENAI": "openai"
  },
  "ApprovalOutcome": {
   "APPROVED": "approved",
   "DENIED": "denied",
   "EDITED": "edited",
   "STOPPED": "stopped",
   "TIMED_OUT": "timed out"
  },
  "ApprovalState": {
   "APPROVED": "approved",
   "CANCELLED": "cancelled",
   "DENIED": "denied",
   "DONE": "done",
   "EXPIRED": "expired",
   "INTERRUPTED": "interrupted",
   "PENDING": "pending",
   "STARTED": "started",
   "WAITING": "waiting"
  },
  "ArtifactSubtype": {
   "AGENT_CREATED": "agent_created",
   "AGENT_CREATION_FORM": "agent_creation_form",
   "AGENT_DELETED": "agent_deleted",
   "AGENT_DELETION_CONFIRM": "agent_deletion_confirm",
   "AGENT_LIST_DISPLAY": "agent_list_display",
   "AGENT_TOKEN_ROTATED": "agent_token_rotated",
   "AGENT_TOKEN_ROTATE_CONFIRM": "agent_token_rotate_confirm",
   "AGENT_UPDATED": "agent_updated",
   "AGENT_UPDATE_FORM": "agent_update_form"
  },
  "BackupState": {
   "DUMPED": "dumped",
   "NOT_REPLICATING": "not replicating",
   "NO_BACKUP": "no backup",
   "OFF": "off",
   "REPLICATING": "replicating",
   "RESTORING": "restoring",
   "UNREACHABLE": "unreachable"
  },
  "ChatRole": {
   "ASSISTANT": "assistant",
   "SYSTEM": "system",
   "TOOL": "tool",
   "USER": "user"
  },
  "ClientAuth": {
   "AGENT_TOKEN": "agent_token",
   "USER_JWT": "user_jwt"
  },
  "CodingTool": {
   "DEV": "dev"
  },
  "ConnectionMode": {
   "WEBHOOK": "webhook",
   "WEBSOCKET": "websocket"
  },
  "ControlCommand": {
   "APPROVE": "approve",
   "DENY": "deny",
   "MESSAGE": "message",
   "PAUSE": "pause",
   "RESUME": "resume",
   "STOP": "stop"
  },
  "DeliveryStatus": {
   "CANCELLED": "cancelled",
   "DEAD": "dead",
   "PENDING": "pending",
   "RETRYING": "retrying",
   "SUCCEEDED": "succeeded"
  },
  "EnvelopeDirection": {
   "TO_AGENT": "to_agent",
   "TO_USER": "to_user"
  },
  "EnvelopeParty": {
   "AGENT": "agent",
   "USER": "user"
  },
  "ErrorCode": {
   "AGENT_EXISTS": "agent_exists",
   "AGENT_EXTERNAL": "agent_external",
   "AGENT_LIMIT_EXCEEDED": "agent_limit_exceeded",
   "APPROVAL_ANSWERED": "approval_answered",
   "APPROVAL_PENDING": "approval_pending",
   "APPROVAL_UNSUPPORTED": "approval_unsupported",
   "BALANCE_UNAVAILABLE": "balance_unavailable",
   "BASE_NOT_FOUND": "base_not_found",
   "CLAIM_REJECTED": "claim_rejected",
   "CODING_BUSY": "coding_busy",
   "CONFLICT": "conflict",
   "CONTEXT_LENGTH_EXCEEDED": "context_length_exceeded",
   "CONVERSATION_BUSY": "conversation_busy",
   "ENVELOPE_KEY_UNKNOWN": "envelope_key_unknown",
   "ENVELOPE_REPLAYED": "envelope_replayed",
   "FORBIDDEN": "forbidden",
   "FORWARD_FAILED": "forward_failed",
   "GATEWAY_REFUSED": "gateway_refused",
   "IDEMPOTENCY_IN_PROGRESS": "idempotency_in_progress",
   "IDEMPOTENCY_MISMATCH": "idempotency_mismatch",
   "INFERENCE_UNAVAILABLE": "inference_unavailable",
   "INSUFFICIENT_BALANCE": "insufficient_balance",
   "INTERNAL": "internal_error",
   "INVALID_API_KEY": "invalid_api_key",
   "INVALID_ARGUMENTS": "invalid_arguments",
   "INVALID_REQUEST": "invalid_request",
   "LONG_RUNNING_LIMIT": "long_running_limit",
   "MANIFEST_INVALID": "manifest_invalid",
   "METHOD_NOT_ALLOWED": "method_not_allowed",
   "MODEL_NOT_FOUND": "model_not_found",
   "NOT_FOUND": "not_found",
   "PAYLOAD_TOO_LARGE": "payload_too_large",
   "RATE_LIMITED": "rate_limited",
   "REPO_EXISTS": "repo_exists",
   "ROTATION_LIMIT": "rotation_limit",
   "RUN_FAILED": "run_failed",
   "RUN_NOT_QUEUED": "run_not_queued",
   "SANDBOX_UNAVAILABLE": "sandbox_unavailable",
   "SECRET_IN_TRANSCRIPT": "secret_in_transcript",
   "SESSION_FINISHED": "session_finished",
   "STORE_BUSY": "store_busy",
   "STORE_UNAVAILABLE": "store_unavailable",
   "TARGET_UNAVAILABLE": "target_unavailable",
   "UNSUPPORTED_MEDIA_TYPE": "unsupported_media_type"
  },
  "EventKind": {
   "APPROVAL": "approval",
   "COMMIT": "commit",
   "CONTROL": "control",
   "LOG": "log",
   "MESSAGE": "message",
   "SPAWN": "spawn",
   "STATUS": "status",
   "TOOL_CALL": "tool-call"
  },
  "ExecutionMode": {
   "LONG_RUNNING": "long-running",
   "ONE_SHOT": "one-shot"
  },
  "FinishReason": {
   "CONTENT_FILTER": "content_filter",
   "ERROR": "error",
   "LENGTH": "length",
   "STOP": "stop",
   "STOPPED": "stopped",
   "TOOL_CALLS": "tool_calls"
  },
  "IdentityCategory": {
   "ASSISTANT": "assistant",
   "BOT": "bot",
   "INTEGRATION": "integration",
   "TOOL": "tool"
  },
  "InboxItemKind": {
   "ENVELOPE": "envelope",
   "SYSTEM": "system"
  },
  "InboxStreamFrame": {
   "INBOX": "inbox"
  },
  "InvitationState": {
   "ACCEPTED": "accepted",
   "EXPIRED": "expired",
   "PENDING": "pending",
   "REVOKED": "revoked"
  },
  "KeyStatus": {
   "CURRENT": "current",
   "EXPIRED": "expired",
   "GRACE": "grace",
   "REVOKED": "revoked"
  },
  "LedgerKind": {
   "AGENT": "agent",
   "CREDIT": "credit"
  },
  "MachineSandbox": {
   "BUBBLEWRAP": "bubblewrap",
   "NONE": "none",
   "UNAVAILABLE": "unavailable"
  },
  "McpTransport": {
   "HTTP": "http",
   "STDIO": "stdio"
  },
  "MemberRole": {
   "ADMIN": "admin",
   "MEMBER": "member"
  },
  "MetricsRange": {
   "DAY": "24h",
   "MONTH": "30d",
   "WEEK": "7d"
  },
  "MsgSubtype": {
   "ARTIFACT_FORM": "artifact_form",
   "ARTIFACT_RESPONSE": "artifact_response"
  },
  "MultitaskStrategy": {
   "ENQUEUE": "enqueue",
   "REJECT": "reject"
  },
  "OpenAIErrorType": {
   "API": "api_error",
   "AUTHENTICATION": "authentication_error",
   "INSUFFICIENT_QUOTA": "insufficient_quota",
   "INVALID_REQUEST": "invalid_request_error",
   "PERMISSION": "permission_error",
   "RATE_LIMIT": "rate_limit_error"
  },
  "OpenAIFinishReason": {
   "CONTENT_FILTER": "content_filter",
   "LENGTH": "length",
   "STOP": "stop",
   "TOOL_CALLS": "tool_calls"
  },
  "PrincipalVia": {
   "API_KEY": "api_key",
   "JWT": "jwt",
   "SESSION": "session"
  },
  "RefusalAnswer": {
   "RAISE": "raise",
   "RECORD": "record"
  },
  "RelationStatus": {
   "ACTIVE": "active",
   "REMOVED": "removed",
   "TERMINATED_BY_DELETION": "terminated_by_deletion"
  },
  "ReplicaGenerationEnd": {
   "MOVED": "moved",
   "REMOVED": "removed",
   "RESTORED": "restored"
  },
  "ReplyFrame": {
   "APPROVAL": "approval",
   "CHAT": "chat",
   "DELTA": "delta",
   "ERROR": "error",
   "OPS": "ops",
   "RUN": "run",
   "START": "start",
   "TOOL": "tool"
  },
  "RepoScheme": {
   "FILE": "file",
   "HTTPS": "https",
   "SSH": "ssh"
  },
  "ResponseStatus": {
   "CANCELLED": "cancelled",
   "COMPLETED": "completed",
   "FAILED": "failed",
   "INCOMPLETE": "incomplete",
   "IN_PROGRESS": "in_progress",
   "QUEUED": "queued"
  },
  "RestoreStatus": {
   "DONE": "done",
   "FAILED": "failed",
   "RUNNING": "running"
  },
  "Role": {
   "ADMIN": "admin",
   "AGENT_TOKEN": "agent token",
   "ANONYMOUS": "anonymous",
   "MACHINE_KEY": "machine key",
   "MEMBER": "member",
   "OTHER_ORG": "other org",
   "SCOPED_KEY": "scoped key"
  },
  "RoutedRunState": {
   "CLAIMED": "claimed",
   "OFFERED": "offered",
   "REPORTED": "reported",
   "WAITING": "waiting",
   "WITHDRAWN": "withdrawn"
  },
  "RunKind": {
   "A2A": "a2a",
   "CHAT": "chat",
   "CODING": "coding",
   "MCP": "mcp",
   "OPENAI": "openai",
   "RESPONSES": "responses",
   "ROUTED": "routed",
   "RUN": "run",
   "SCHEDULED": "scheduled",
   "TOOL": "tool"
  },
  "RunStatus": {
   "ERROR": "error",
   "OK": "ok",
   "QUEUED": "queued",
   "RUNNING": "running",
   "WAITING": "waiting"
  },
  "SecretSeverity": {
   "CRITICAL": "critical",
   "HIGH": "high",
   "LOW": "low",
   "MEDIUM": "medium"
  },
  "SessionStatus": {
   "DONE": "done",
   "ERROR": "error",
   "PAUSED": "paused",
   "RUNNING": "running"
  },
  "ShareState": {
   "ACTIVE": "active",
   "EXPIRED": "expired",
   "REVOKED": "revoked"
  },
  "ShareSubject": {
   "CONVERSATION": "conversation",
   "SESSION": "session"
  },
  "SlotOutcome": {
   "BACKOFF": "backoff",
   "BUSY": "busy",
   "FIRED": "fired",
   "MISSED": "missed"
  },
  "StoreCondition": {
   "FULL": "full",
   "READ_ONLY": "read_only",
   "RESTORING": "restoring"
  },
  "StreamFrameKind": {
   "DELTA": "delta",
   "EVENT": "event",
   "EVENTS": "events",
   "RESET": "reset",
   "SESSION": "session"
  },
  "SystemCommand": {
   "CREATE_AGENT": "/create-agent",
   "DELETE_AGENT": "/delete-agent",
   "HELP": "/help",
   "LIST_AGENTS": "/list-agents",
   "ROTATE_TOKEN": "/rotate-token",
   "UPDATE_AGENT": "/update-agent"
  },
  "SystemMessageCode": {
   "AGENT_DELETED_BY_CREATOR": "agent.deleted_by_creator",
   "AGENT_KEYS_REVOKED": "agent.keys_revoked",
   "AGENT_TOKEN_REVOKED": "agent.token_revoked",
   "AGENT_TOKEN_ROTATED": "agent.token_rotated"
  },
  "SystemMessageType": {
   "SECURITY_ALERT": "security_alert"
  },
  "TargetKind": {
   "CLOUD": "cloud",
   "CLUSTER": "cluster",
   "GPU": "gpu",
   "LAPTOP": "laptop",
   "MACHINE": "machine"
  },
  "TargetStatus": {
   "DRAINING": "draining",
   "OFFLINE": "offline",
   "ONLINE": "online"
  },
  "ToolSource": {
   "AGENT": "agent",
   "BUILTIN": "builtin",
   "MACHINE": "machine",
   "MCP": "mcp"
  },
  "WebhookChannel": {
   "IDENTITY": "identity",
   "ORG": "org"
  },
  "WebhookDisabledReason": {
   "FAILING": "failing",
   "GONE": "gone",
   "NONE": ""
  },
  "WebhookEventType": {
   "BALANCE_LOW": "balance.low",
   "CODING_PUSHED": "coding.pushed",
   "ENVELOPE": "envelope.created",
   "RESPONSE_CANCELLED": "response.cancelled",
   "RESPONSE_COMPLETED": "response.completed",
   "RESPONSE_FAILED": "response.failed",
   "RESPONSE_INCOMPLETE": "response.incomplete",
   "RUN_FINISHED": "run.finished",
   "RUN_WAITING": "run.waiting",
   "SECURITY_ALERT": "security_alert",
   "SESSION_PUBLISHED": "session.published",
   "TARGET_OFFLINE": "target.offline",
   "TEST": "webhook.test"
  },
  "WsFrameType": {
   "ACK": "ack",
   "ACKED": "acked",
   "ENVELOPE": "envelope",
   "ERROR": "error",
   "MESSAGE": "message",
   "SECURITY_ALERT": "security_alert",
   "SENT": "sent"
  }
 },
 "envelopeParty": [
  "user",
  "agent"
 ],
 "eventKind": [
  "message",
  "tool-call",
  "spawn",
  "log",
  "status",
  "control",
  "commit",
  "approval"
 ],
 "eventKindAppendable": [
  "message",
  "tool-call",
  "spawn",
  "log",
  "status",
  "control",
  "commit"
 ],
 "keyStatus": [
  "current",
  "grace",
  "expired",
  "revoked"
 ],
 "metricsRange": [
  "24h",
  "7d",
  "30d"
 ],
 "msgSubtype": [
  "artifact_form",
  "artifact_response"
 ],
 "runKind": [
  "run",
  "scheduled",
  "routed",
  "tool",
  "chat",
  "openai",
  "coding",
  "a2a",
  "mcp",
  "responses"
 ],
 "runStatus": [
  "queued",
  "running",
  "waiting",
  "ok",
  "error"
 ],
 "sessionStatus": [
  "running",
  "paused",
  "done",
  "error"
 ],
 "sessionTerminal": [
  "done",
  "error"
 ],
 "systemMessageCode": [
  "agent.deleted_by_creator",
  "agent.keys_revoked",
  "agent.token_rotated",
  "agent.token_revoked"
 ],
 "targetKind": [
  "laptop",
  "cloud",
  "gpu",
  "cluster",
  "machine"
 ],
 "targetStatus": [
  "online",
  "offline",
  "draining"
 ],
 "word": {
  "approval": "approval",
  "commit": "commit",
  "external": "external",
  "pending": "pending",
  "runError": "error",
  "sessionError": "error",
  "stopped": "stopped",
  "toolCall": "tool-call",
  "truncated": "length",
  "waiting": "waiting"
 }
});
