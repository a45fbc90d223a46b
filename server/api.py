"""The one NinjaAPI of `/v1/agents`, its principal check and the error envelope.

Every error body is `{"status", "code", "error"}` plus named extras (DESIGN §11); Ninja's
validation errors become 400 `invalid_request` with a `fields` list. OpenAPI is served at
`/v1/agents/openapi.json`, the docs page at `/v1/agents/docs`.
"""

import json
import logging

from django.core.exceptions import PermissionDenied, RequestDataTooBig, SuspiciousOperation
from django.http import Http404, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError
from ninja.parser import Parser
from ninja.utils import check_csrf

from agents_site.errors import ApiError, Forbidden, InternalError, InvalidRequest, NotFound, PayloadTooLarge, error_response, error_with
from agents_site.schemas import UNKNOWN_FIELD
from agents_site.vocabulary import ErrorCode, PrincipalVia
from agents_site.wire import json_object_body, unstorable_text
from tenancy import stores
from tenancy.faults import store_fault
from tenancy.authenticate import org_principal
from agents.api import router as agents_router
from agents.api_runs import router as runs_router
from chat.api import router as chat_router
from chat.api_shares import router as shares_router
from coding.api import coding_router, repos_router
from sessions.api import builds_router, sessions_router
from agents.api_approvals import router as approvals_router
from targets.api import router as targets_router
from webhooks.api import router as webhooks_router
from server.openapi import complete

logger = logging.getLogger(__name__)


class OrgPrincipalAuth:
    """Ninja auth: require a validated principal acting for an org, else 403 (error shape).

    Session-login callers must also pass Django's CSRF check on unsafe methods. The OpenAPI
    document names it `bearerAuth`: an API key `ak_…` sent as `Authorization: Bearer ak_…`.
    """

    openapi_security_schema = {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "ak_…",
        "description": "An API key of your org (`ak_` + 48 hex characters), sent as `Authorization: Bearer ak_…`.",
    }

    def __call__(self, request):
        principal = org_principal(request)
        if principal.via == PrincipalVia.SESSION and request.method not in ("GET", "HEAD", "OPTIONS"):
            if check_csrf(request) is not None:
                raise Forbidden("CSRF check failed")
        return principal


class JsonObjectParser(Parser):
    """Parse a request body as one JSON object of storable UTF-8 text, or refuse it with a 400.

    Ninja's schemas read any value attribute by attribute, so without this an array, a string or
    `null` would pass as an empty object (a PATCH that changes nothing but answers 200). A lone
    `\\ud800` escape is valid JSON but no UTF-8 store can hold it; a `\\u0000` is valid JSON but
    PostgreSQL cannot hold it. Refusing both here covers every text field of every route at
    once (bodies here, query strings in `parse_querydict`; the error-shape middleware refuses a
    NUL in any `/v1/` path, query or JSON body, for routes that read their body themselves).
    """

    def parse_body(self, request) -> dict:
        """Return the body as a dict; raise `InvalidRequest` (400) naming what is wrong."""
        return json_object_body(request.body)

    def parse_querydict(self, data, list_fields, request) -> dict:
        """Return the query (or form) fields as Ninja expects; raise `InvalidRequest` on a NUL."""
        result = super().parse_querydict(data, list_fields, request)
        refusal = unstorable_text(result)
        if refusal is not None:
            raise refusal
        return result


DESCRIPTION = """Define agents, run them, and keep every run as a record your org owns; watch and
steer live sessions; route runs to your own machines.

Every call but the public builds gallery needs an API key of your org, sent as
`Authorization: Bearer ak_…` (use **Authorize**). Every error has the same shape:
`{"status": <HTTP status>, "code": "<word>", "error": "<sentence>"}`, sometimes with named extra
fields. A JSON `null` in a body is an omitted field.

Not in this document: the OpenAI-compatible endpoint at `/v1/agents/openai/v1` (`GET /models`,
`POST /chat/completions`; every agent as a model), whose contract is OpenAI's API and whose
errors are OpenAI's error object — see the guide, docs/guides/openai-compatible.md."""


class AgentsAPI(NinjaAPI):
    """The NinjaAPI whose OpenAPI document also declares what every route shares (`openapi`)."""

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        """Return Ninja's document completed by `server.openapi.complete`."""
        return complete(super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params))


api = AgentsAPI(
    title="Agents",
    version="1.0.0",
    description=DESCRIPTION,
    urls_namespace="agents_api",
    docs_url="/agents/docs",
    openapi_url="/agents/openapi.json",
    auth=OrgPrincipalAuth(),
    parser=JsonObjectParser(),
)


@api.exception_handler(ApiError)
def _api_error(request, exc: ApiError):
    return error_response(exc)


@api.exception_handler(ValidationError)
def _validation_error(request, exc: ValidationError):
    fields = []
    for err in exc.errors:
        loc = [str(p) for p in err.get("loc", ())]
        message = UNKNOWN_FIELD if err.get("type") == "extra_forbidden" else err.get("msg", "invalid")
        fields.append({"field": ".".join(loc), "message": message})
    first = fields[0] if fields else {"field": "", "message": "invalid"}
    message = f"invalid request: {first['field']}: {first['message']}" if first["field"] else "invalid request"
    return error_response(InvalidRequest(message, fields=fields))


@api.exception_handler(AuthenticationError)
def _auth_error(request, exc):
    return error_response(Forbidden())


@api.exception_handler(HttpError)
def _http_error(request, exc: HttpError):
    if isinstance(exc.__cause__, ApiError):  # Ninja wraps what the body parser raised
        return error_response(exc.__cause__)
    code = {404: ErrorCode.NOT_FOUND, 403: ErrorCode.FORBIDDEN, 405: ErrorCode.METHOD_NOT_ALLOWED}.get(
        exc.status_code, ErrorCode.INVALID_REQUEST
    )
    error = error_with(status=exc.status_code, code=str(code), message=str(exc.message) if hasattr(exc, "message") else str(exc))
    return JsonResponse(error.body(), status=exc.status_code)


@api.exception_handler(RequestDataTooBig)
def _too_big(request, exc):
    return error_response(PayloadTooLarge())


@api.exception_handler(Http404)
def _http404(request, exc):
    return error_response(NotFound())


@api.exception_handler(PermissionDenied)
def _permission_denied(request, exc):
    return error_response(Forbidden("permission denied"))


@api.exception_handler(SuspiciousOperation)
def _suspicious(request, exc):
    return error_response(InvalidRequest("the request was refused as malformed"))


@api.exception_handler(stores.InvalidOrg)
def _invalid_org(request, exc):
    return error_response(Forbidden("an org scope is required"))


@api.exception_handler(Exception)
def _unexpected(request, exc):
    fault = store_fault(exc)
    if fault is not None:  # overload or a store that cannot take writes: a 503 that says which
        logger.warning("%s on %s %s: %s", fault.code, request.method, request.path, exc)
        return error_response(fault)
    logger.exception("unexpected error on %s %s", request.method, request.path)
    return JsonResponse(InternalError().body(), status=500)


def _mount() -> None:
    # Fixed words before `/{ref}`: the agent router is added last so `/{ref}` never shadows them.

    api.add_router("/agents", approvals_router)  # /agents/sessions/{id}/approve|deny, /agents/approvals
    api.add_router("/agents", shares_router)  # /agents/sessions/{id}/shares, /agents/chat/…/shares, /chat/shared, /chat/shares/read
    api.add_router("/agents/sessions", sessions_router)
    api.add_router("/agents/builds", builds_router)
    api.add_router("/agents/targets", targets_router)
    api.add_router("/agents/repos", repos_router)
    api.add_router("/agents/coding", coding_router)
    api.add_router("/agents/chat", chat_router)
    api.add_router("/agents/webhooks", webhooks_router)
    api.add_router("/agents", runs_router)
    api.add_router("/agents", agents_router)


_mount()
