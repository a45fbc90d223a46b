"""Typed errors of the sessions capability (rendered by the one error handler)."""

from agents_site.errors import ApiError, Conflict, NotFound
from agents_site.vocabulary import ErrorCode


class SessionNotFound(NotFound):
    """404: no such session in the caller's org (another org's id answers the same)."""

    default_message = "session not found"


class SessionFinished(Conflict):
    """409: the session is `done`/`error`; it never reopens and refuses every command."""

    code = ErrorCode.SESSION_FINISHED
    default_message = "session is finished"


class SecretInTranscript(ApiError):
    """422: a credential was found in a payload; nothing was stored.

    Extras: `findings` = `[{rule, severity, line, preview, fingerprint}]` (masked previews).
    """

    status = 422
    code = ErrorCode.SECRET_IN_TRANSCRIPT
    default_message = "transcript rejected: secret detected"


class ForwardFailed(ApiError):
    """502: the control command was recorded but the live executor did not take it.

    Extras: `command` and the recorded `event`, so the caller knows the intent is durable.
    """

    status = 502
    code = ErrorCode.FORWARD_FAILED
    default_message = "control recorded but forward failed"


class BuildNotFound(NotFound):
    """404: no published build at that address (unpublished, unknown org or project)."""

    default_message = "build not found"
