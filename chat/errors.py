"""Typed errors of the conversation surface (rendered by the one error handler)."""

from agents_site.errors import ApiError, Conflict, NotFound
from agents_site.vocabulary import ErrorCode


class ConversationNotFound(NotFound):
    """404: no conversation of that id in the caller's org (another org's is the same 404)."""

    default_message = "conversation not found"


class ConversationBusy(Conflict):
    """409 `conversation_busy`: a round of the conversation is in flight (`multitaskStrategy`).

    Extras: `conversationId`. Nothing was stored, nothing held or billed.
    """

    code = ErrorCode.CONVERSATION_BUSY
    default_message = "a round of this conversation is in flight; retry when it has finished, or send multitaskStrategy enqueue"


class RoundFailed(ApiError):
    """502 `run_failed`: the round's run executed and failed; `error` is the run's error.

    Extras: `runId` (the recorded run, readable at GET /v1/agents/runs/{runId}) and
    `conversationId` (the caller's message stays stored there).
    """

    status = 502
    code = ErrorCode.RUN_FAILED
    default_message = "the run failed"


class RoundOverflowed(ApiError):
    """400 `context_length_exceeded`: the round's run failed because the prompt is over the model's
    context window (the gateway said so; asked once, never re-sent). Extras as `RoundFailed`
    (`runId`, `conversationId`): the next round of the conversation is trimmed to the window learned."""

    status = 400
    code = ErrorCode.CONTEXT_LENGTH_EXCEEDED
    default_message = "the prompt is over the model's context window"
