"""The wire words the server, the runner and the shared core all speak, Django-free (issue 48 item 6).

The runner imports nothing of the server and `toolkit` nothing of either, so the words both
sides send and read — run statuses, finish reasons, run kinds, chat roles, session statuses,
event kinds, control verbs, target kinds, machine sandboxes — are spelled here, once, as
`StrEnum`s. The server's vocabulary (`agents_site/vocabulary.py`) builds its `TextChoices` of
the same names from these members (adding labels, comments and the sets beside them), and the
console's `vocabulary.js` is generated from that (`manage.py write_vocabulary_js`): one spelling
of each word. A member is a `str`: it compares, hashes and serialises (JSON) as its word.
tests/runner/test_vocabulary_words.py counts the literal words left in `runner/` and `toolkit/` (0).
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """The status of a run (`agents_site.vocabulary.RunStatus`)."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    OK = "ok"
    ERROR = "error"


class FinishReason(StrEnum):
    """Why a finished run's last model reply ended (`agents_site.vocabulary.FinishReason`)."""

    STOP = "stop"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"
    TOOL_CALLS = "tool_calls"
    STOPPED = "stopped"
    ERROR = "error"


class RunKind(StrEnum):
    """What started a run (`agents_site.vocabulary.RunKind`)."""

    RUN = "run"
    SCHEDULED = "scheduled"
    ROUTED = "routed"
    TOOL = "tool"
    CHAT = "chat"
    OPENAI = "openai"
    CODING = "coding"
    A2A = "a2a"
    MCP = "mcp"
    RESPONSES = "responses"


class ChatRole(StrEnum):
    """Who wrote one message of a prompt (OpenAI's roles; `agents_site.vocabulary.ChatRole`)."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class SessionStatus(StrEnum):
    """The status of a live session (`agents_site.vocabulary.SessionStatus`)."""

    RUNNING = "running"
    PAUSED = "paused"
    DONE = "done"
    ERROR = "error"


class EventKind(StrEnum):
    """The kind of one turn in a session's log (`agents_site.vocabulary.EventKind`)."""

    MESSAGE = "message"
    TOOL_CALL = "tool-call"
    SPAWN = "spawn"
    LOG = "log"
    STATUS = "status"
    CONTROL = "control"
    COMMIT = "commit"
    APPROVAL = "approval"


class ControlCommand(StrEnum):
    """A steering command recorded as a `control` event (`agents_site.vocabulary.ControlCommand`)."""

    PAUSE = "pause"
    RESUME = "resume"
    STOP = "stop"
    MESSAGE = "message"
    APPROVE = "approve"
    DENY = "deny"


class TargetKind(StrEnum):
    """The kind of a registered machine (`agents_site.vocabulary.TargetKind`)."""

    LAPTOP = "laptop"
    CLOUD = "cloud"
    GPU = "gpu"
    CLUSTER = "cluster"
    MACHINE = "machine"


class MachineSandbox(StrEnum):
    """How a machine's runner confines a routed coding run's commands (`agents_site.vocabulary.MachineSandbox`)."""

    BUBBLEWRAP = "bubblewrap"
    NONE = "none"
    UNAVAILABLE = "unavailable"
