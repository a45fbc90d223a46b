"""The one NinjaAPI of `/v1/agents`, its principal check and the error envelope.

Every error body is `{"status", "code", "error"}` plus named extras (DESIGN §11); Ninja's
validation errors become 400 `invalid_request` with a `fields` list. OpenAPI is served at
`/v1/agents/openapi.json`, the docs page at `/v1/agents/docs`.
"""

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.utils import check_csrf

from agents_site.errors import ApiError, Forbidden, InvalidRequest, PayloadTooLarge
from agents_site.vocabulary import ErrorCode, PrincipalVia
from tenancy import stores
from tenancy.principal import require_org

logger = logging.getLogger(__name__)


class OrgPrincipalAuth:
    """Ninja auth: require a validated principal acting for an org, else 403 (error shape).

    Session-login callers must also pass Django's CSRF check on unsafe methods.
    """

    openapi_type = "http"
    openapi_scheme = "bearer"

    def __call__(self, request):
        error = getattr(request, "principal_error", None)
        if error is not None:
            raise error
        principal = require_org(getattr(request, "principal", None))
        if principal.via == PrincipalVia.SESSION and request.method not in ("GET", "HEAD", "OPTIONS"):
            if check_csrf(request) is not None:
                raise Forbidden("CSRF check failed")
        return principal


api = NinjaAPI(
    title="Agents",
    version="1.0.0",
    description="Define agents, run them, keep every run (spec 003).",
    urls_namespace="agents_api",
    docs_url="/agents/docs",
    openapi_url="/agents/openapi.json",
    auth=OrgPrincipalAuth(),
)


def error_response(error: ApiError) -> JsonResponse:
    """Render `error` as its JSON body with its status."""
    return JsonResponse(error.body(), status=error.status)


@api.exception_handler(ApiError)
def _api_error(request, exc: ApiError):
    return error_response(exc)


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    fields = []
    for err in exc.errors:
        loc = [str(p) for p in err.get("loc", ())]
        fields.append({"field": ".".join(loc), "message": err.get("msg", "invalid")})
    first = fields[0] if fields else {"field": "", "message": "invalid"}
    message = f"invalid request: {first['field']}: {first['message']}" if first["field"] else "invalid request"
    return error_response(InvalidRequest(message, fields=fields))


@api.exception_handler(AuthenticationError)
def _auth_error(request, exc):
    return error_response(Forbidden())


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    code = {404: ErrorCode.NOT_FOUND, 403: ErrorCode.FORBIDDEN, 405: ErrorCode.METHOD_NOT_ALLOWED}.get(
        exc.status_code, ErrorCode.INVALID_REQUEST
    )
    body = {"status": exc.status_code, "code": str(code), "error": str(exc.message) if hasattr(exc, "message") else str(exc)}
    return JsonResponse(body, status=exc.status_code)


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    return error_response(PayloadTooLarge())


@api.exception_handler(stores.InvalidOrg)
def _invalid_org(request, exc):
    return error_response(Forbidden("an org scope is required"))


@api.exception_handler(Exception)
def _unexpected(request, exc):
    logger.exception("unexpected error on %s %s", request.method, request.path)
    return JsonResponse(
        {"status": 500, "code": str(ErrorCode.INTERNAL), "error": "internal error; nothing was half-written"}, status=500
    )


def _mount() -> None:
    # Fixed words before `/{ref}`: the agent router is added last so `/{ref}` never shadows them.
    from agents.api import router as agents_router
    from agents.api_runs import router as runs_router
    from sessions.api import builds_router, sessions_router
    from targets.api import router as targets_router

    api.add_router("/agents/sessions", sessions_router)
    api.add_router("/agents/builds", builds_router)
    api.add_router("/agents/targets", targets_router)
    api.add_router("/agents", runs_router)
    api.add_router("/agents", agents_router)


_mount()
