"""Typed errors and the one error shape.

Services raise a subclass of `ApiError`; the API's handler renders every one as
`{"status": <int>, "code": "<snake_case>", "error": "<one sentence>"}` plus the error's named
extras (e.g. `findings`). In app code, just raise.

This module builds every `{"status", "code", "error"}` body of the project (`ApiError.body`):
the `/v1/agents` envelope, DRF's identity API, the identity WebSocket's error frame, the MCP
server's structured tool error and a stream's `event: error` all take theirs from here, and a
status no class names is `error_with(status=…, code=…, message=…)`. The faces with a wire shape
of their own render from an `ApiError` too: OpenAI's error object (`openai_api.errors`), A2A's
JSON-RPC error (`a2a_server.handler.a2a_error`). tests/test_one_error_builder.py fails on a body
built by hand anywhere else.
"""

from typing import Any

from agents_site.vocabulary import ErrorCode, StoreCondition


class ApiError(Exception):
    """An error that answers HTTP `status` with code `code` and sentence `message`.

    `extras` are merged into the body at top level (e.g. `{"findings": [...]}`).
    """

    status: int = 400
    code: ErrorCode = ErrorCode.INVALID_REQUEST
    default_message: str = "the request is invalid"

    def __init__(self, message: str | None = None, **extras: Any) -> None:
        self.message = message or self.default_message
        self.extras = extras
        super().__init__(self.message)

    def body(self) -> dict:
        """Return the error body: `{"status", "code", "error"}` plus extras."""
        return {"status": self.status, "code": str(self.code), "error": self.message, **self.extras}

    def headers(self) -> dict[str, str]:
        """Return the response headers this error adds (none by default)."""
        return {}


def error_response(error: ApiError):
    """Return `error` as a `JsonResponse`: its body (`body()`), its status and its headers (e.g. `Retry-After`).

    The response carries the error as `agents_error`: an answer the code meant to give, which
    the outermost middleware logs as such (one warning line, never a traceback; issue 51).
    """
    from django.http import JsonResponse

    response = JsonResponse(error.body(), status=error.status, headers=error.headers())
    response.agents_error = error
    return response


def error_with(*, status: int, code: str, message: str) -> ApiError:
    """Return an `ApiError` answering `status` with `code` and `message`, for a status no class names.

    Example: `error_with(status=405, code=ErrorCode.METHOD_NOT_ALLOWED, message="Method \"PUT\" not allowed.")`.
    """
    error = ApiError(message)
    error.status, error.code = status, code
    return error


class InternalError(ApiError):
    """An unexpected fault (500 `internal_error`): the request's writes were rolled back."""

    status = 500
    code = ErrorCode.INTERNAL
    default_message = "internal error; nothing was half-written"


class InvalidRequest(ApiError):
    """400: the request failed validation; nothing was written."""

    status = 400
    code = ErrorCode.INVALID_REQUEST


class PayloadTooLarge(ApiError):
    """413: the request body exceeds the upload limit."""

    status = 413
    code = ErrorCode.PAYLOAD_TOO_LARGE
    default_message = "request body too large"


class UnsupportedMediaType(ApiError):
    """415: a request body that is not `application/json` (or `application/*+json`) on a JSON route."""

    status = 415
    code = ErrorCode.UNSUPPORTED_MEDIA_TYPE
    default_message = "the request body must be JSON (Content-Type: application/json)"


class Forbidden(ApiError):
    """403: no validated principal, no org, or a credential that failed."""

    status = 403
    code = ErrorCode.FORBIDDEN
    default_message = "a validated principal is required"


class NotFound(ApiError):
    """404: unknown, or belonging to another org (the two are never told apart)."""

    status = 404
    code = ErrorCode.NOT_FOUND
    default_message = "not found"


class Conflict(ApiError):
    """409: the write collides with what is stored."""

    status = 409
    code = ErrorCode.CONFLICT
    default_message = "conflict"


class ServiceUnavailable(ApiError):
    """503: a dependency this request needs is not there."""

    status = 503
    code = ErrorCode.INFERENCE_UNAVAILABLE
    default_message = "service unavailable"


class StoreBusy(ApiError):
    """503: every pooled connection (or the SQLite write lock) stayed taken for the whole wait.

    Answered with `Retry-After` (seconds); the request wrote nothing.
    """

    status = 503
    code = ErrorCode.STORE_BUSY
    default_message = "the store is busy: no database connection came free in time; nothing was written, retry shortly"
    retry_after_seconds = 2

    def headers(self) -> dict[str, str]:
        """Return `{"Retry-After": "<seconds>"}`."""
        return {"Retry-After": str(self.retry_after_seconds)}


class StoreUnavailable(ApiError):
    """503: the org's store cannot take this request; the body's `condition` says why.

    `condition` is a `StoreCondition` (`read_only`, `full`, `restoring`: `manage.py restore_org`
    is replacing the org's store; answered with `Retry-After`). The request's transaction was
    rolled back, so nothing was half-written.
    """

    status = 503
    code = ErrorCode.STORE_UNAVAILABLE

    def __init__(self, condition: StoreCondition) -> None:
        words = {StoreCondition.READ_ONLY: "is read-only", StoreCondition.FULL: "is full",
                 StoreCondition.RESTORING: "is being restored from its backup"}[condition]
        super().__init__(f"the org's store {words}; nothing was written", condition=str(condition))
        self.condition = condition

    def headers(self) -> dict[str, str]:
        """Return `{"Retry-After": "5"}` while the store is being restored; nothing otherwise."""
        return {"Retry-After": "5"} if self.condition == StoreCondition.RESTORING else {}
