"""The DRF exception handler of the identity API: the project's one error shape.

Every error is `{"status", "code", "error"}` plus named extras (DESIGN §11), with codes from
`agents_site.vocabulary.ErrorCode`: typed `ApiError`s render their own body; DRF's validation
errors become 400 `invalid_request` with a `fields` list; throttling 429 `rate_limited` with
`retry_after` (and the `Retry-After` header); authentication and permission failures 403; an
unexpected fault 500 `internal_error`.
"""

from __future__ import annotations

import logging
import math

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework.response import Response

from agents_site.errors import ApiError, Forbidden, InternalError, InvalidRequest, NotFound, PayloadTooLarge, UnsupportedMediaType, error_with
from agents_site.vocabulary import ErrorCode
from identity.errors import RateLimited
from tenancy import stores

logger = logging.getLogger(__name__)


def _flatten(detail, prefix: str = "") -> list[dict]:
    if isinstance(detail, dict):
        out: list[dict] = []
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            out.extend(_flatten(value, "" if name == "non_field_errors" else name))
        return out
    if isinstance(detail, list):
        out = []
        for index, value in enumerate(detail):
            if isinstance(value, (dict, list)):
                out.extend(_flatten(value, f"{prefix}.{index}" if prefix else str(index)))
            else:
                out.append({"field": prefix, "message": str(value)})
        return out
    return [{"field": prefix, "message": str(detail)}]


def _as_api_error(exc: Exception) -> ApiError | None:
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, drf.ValidationError):
        fields = _flatten(exc.detail)
        first = fields[0] if fields else {"field": "", "message": "invalid"}
        message = f"invalid request: {first['field']}: {first['message']}" if first["field"] else f"invalid request: {first['message']}"
        return InvalidRequest(message, fields=fields)
    if isinstance(exc, drf.Throttled):
        wait = int(math.ceil(exc.wait)) if exc.wait is not None else 60
        return RateLimited("too many requests; retry later", retry_after=wait)
    if isinstance(exc, (drf.NotAuthenticated, drf.AuthenticationFailed, drf.PermissionDenied, DjangoPermissionDenied)):
        return Forbidden(str(getattr(exc, "detail", "")) or None)
    if isinstance(exc, (drf.NotFound, Http404)):
        return NotFound()
    if isinstance(exc, drf.MethodNotAllowed):
        return error_with(status=405, code=ErrorCode.METHOD_NOT_ALLOWED, message=str(exc.detail))
    if isinstance(exc, drf.UnsupportedMediaType):
        return UnsupportedMediaType()
    if isinstance(exc, drf.ParseError):
        return InvalidRequest(f"the request body could not be read: {exc.detail}")
    if isinstance(exc, RequestDataTooBig):
        return PayloadTooLarge()
    if isinstance(exc, stores.InvalidOrg):
        return Forbidden("an org scope is required")
    return None


def exception_handler(exc: Exception, context) -> Response:
    """Return the error response for `exc` in the one error shape (never None: no HTML 500)."""
    error = _as_api_error(exc)
    if error is None:
        logger.exception("unexpected error in the identity API", exc_info=exc)
        return Response(InternalError().body(), status=500)
    response = Response(error.body(), status=error.status)
    if error.status == 429 and "retry_after" in error.extras:
        response["Retry-After"] = str(error.extras["retry_after"])
    if error.status == 405 and isinstance(exc, drf.MethodNotAllowed):
        view = context.get("view")
        if view is not None:
            response["Allow"] = ", ".join(view.allowed_methods)
    return response
