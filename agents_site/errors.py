"""Typed errors and the one error shape.

Services raise a subclass of `ApiError`; the API's handler renders every one as
`{"status": <int>, "code": "<snake_case>", "error": "<one sentence>"}` plus the error's named
extras (e.g. `findings`). In app code, just raise.
"""

from typing import Any

from agents_site.vocabulary import ErrorCode


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


class InvalidRequest(ApiError):
    """400: the request failed validation; nothing was written."""

    status = 400
    code = ErrorCode.INVALID_REQUEST


class PayloadTooLarge(ApiError):
    """413: the request body exceeds the upload limit."""

    status = 413
    code = ErrorCode.PAYLOAD_TOO_LARGE
    default_message = "request body too large"


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
