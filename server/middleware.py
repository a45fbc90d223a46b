"""Give every error answered under `/v1/` the one error shape, whoever produced it; trace every request.

The API's own errors are shaped by `server.api`; a few are answered before or around it:
Django's resolver answers an unknown path with an HTML 404, Ninja answers a method a route does
not serve with a text 405, and a fault in a middleware becomes Django's HTML 500. This
middleware, outermost, rewrites any such non-JSON error under `/v1/` as
`{"status", "code", "error"}` (DESIGN §11) — or, under the OpenAI-compatible endpoint
(`/v1/agents/openai/v1/`), as OpenAI's error object `{"error": {"message", "type", "param",
"code"}}`, whose JSON bodies it never rewrites. Pages outside `/v1/` (admin) are left alone.

A fault raised outside the API's own handler (a middleware reaching a busy or read-only store)
is remembered from Django's `got_request_exception` and answered as the API would: 503
`store_busy` or `store_unavailable` (`tenancy.faults`). A `/v1/` request holding a NUL
character (U+0000) in its path, query or JSON body is refused here with 400 before any view
runs, so no route — including one that reads its body itself — can hand one to a store
(PostgreSQL text cannot hold it; SQLite mode answers the same).
"""

import json
import logging
import sys

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.core.signals import got_request_exception
from django.http import Http404, JsonResponse
from django.utils.decorators import sync_and_async_middleware
from opentelemetry.trace import SpanKind

from runs.tracing import error_status, tracer
from agents_site import permissions
from agents_site.errors import ApiError, Forbidden, InvalidRequest, NotFound, UnsupportedMediaType
from agents_site.vocabulary import Access, ApiKeyScope, ErrorCode, PrincipalVia, Role
from agents_site.wire import NUL, NUL_ESCAPE, unstorable_text
from openai_api.errors import InvalidApiKey, error_object
from tenancy.faults import store_fault
from tenancy.principal import SCOPE_PATHS

logger = logging.getLogger(__name__)

API_PREFIX = "/v1/"
# The second deliberate exception to the one error shape: OpenAI's error object on its endpoint.
OPENAI_PREFIX = SCOPE_PATHS[ApiKeyScope.OPENAI]


def _render(request, error: ApiError) -> JsonResponse:
    """Render `error` in the shape of the request's path: OpenAI's error object under the
    OpenAI-compatible endpoint, `{"status", "code", "error"}` everywhere else under `/v1/`."""
    body = error_object(error) if request.path.startswith(OPENAI_PREFIX) else error.body()
    response = JsonResponse(body, status=error.status, headers=error.headers())
    response.agents_error = error
    return response

_CODES = {
    400: ErrorCode.INVALID_REQUEST,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
    415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
}


def _remember_exception(sender, request=None, **kwargs):
    # Sent while the exception is being handled, so it is the one in sys.exc_info().
    if request is not None:
        request.agents_exception = sys.exc_info()[1]


got_request_exception.connect(_remember_exception, dispatch_uid="server.middleware.remember_exception")


def _nul_refusal(request) -> InvalidRequest | None:
    if NUL in request.path:
        return InvalidRequest("the request path must not contain a NUL character (U+0000)")
    refusal = unstorable_text({key: request.GET.getlist(key) for key in request.GET})
    if refusal is not None:
        return refusal
    try:
        body = request.body
    except RequestDataTooBig:  # the route answers 413 itself
        return None
    if NUL_ESCAPE not in body:  # a NUL can only reach JSON text escaped: no parse without one
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # the route answers its own 400 for a body that is not JSON
        return None
    return unstorable_text(data)


_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def is_json_media_type(content_type: str) -> bool:
    """Return whether `content_type` (parameters stripped) is `application/json` or `application/<x>+json`."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def _media_refusal(request) -> ApiError | None:
    """Return the 415 for a `/v1/` write whose non-empty body is not declared JSON, else None.

    Every write route of both APIs reads JSON; a `text/plain`, XML or form body is refused
    before any view runs (a body the route never reads is still refused: nothing guesses).
    """
    if request.method not in _BODY_METHODS:
        return None
    try:
        body = request.body
    except RequestDataTooBig:  # the route answers 413 itself
        return None
    if not body or is_json_media_type(request.META.get("CONTENT_TYPE", "")):
        return None
    return UnsupportedMediaType()


def _refused(request):
    """Return a 415 for a `/v1/` write whose body is not JSON, a 400 for a NUL in its path, query
    or JSON body, else None."""
    if not request.path.startswith(API_PREFIX):
        return None
    refusal = _media_refusal(request) or _nul_refusal(request)
    return _render(request, refusal) if refusal is not None else None


def _logged(request, response):
    """Log an answer the code meant to give (`response.agents_error`, `error_response`) with status
    ≥ 500 — a restore's 503, a busy store's, an unconfigured gateway's — as one warning line, and
    mark it logged so Django's request logger does not log it again as an error (issue 51)."""
    error = getattr(response, "agents_error", None)
    if error is not None and response.status_code >= 500:
        logger.warning("%s %s answered %s %s: %s", request.method, request.path, response.status_code, error.code, error.message)
        response._has_been_logged = True  # django.utils.log.log_response's own mark
    return response


def _shaped(request, response):
    if response.status_code < 400 or not request.path.startswith(API_PREFIX):
        return response
    if getattr(response, "agents_render_for_path", False):  # refused before the view (tenancy.middleware)
        return _render(request, response.agents_error)
    if response.status_code >= 500:
        fault = store_fault(getattr(request, "agents_exception", None))
        if fault is not None:
            return _render(request, fault)
    if response.get("Content-Type", "").startswith("application/json"):
        return response  # shaped by the API (or, under the OpenAI prefix, as OpenAI's error object)
    status = response.status_code
    code = _CODES.get(status, ErrorCode.INTERNAL if status >= 500 else ErrorCode.INVALID_REQUEST)
    if status == 404:
        message = f"no route {request.path}"
    elif status == 405:
        message = f"{request.method} is not allowed on {request.path}"
    elif status >= 500:
        message = "internal error"
    else:
        message = (response.reason_phrase or "request refused").lower()
    error = ApiError(message)
    error.status, error.code = status, code
    shaped = _render(request, error)
    if response.has_header("Allow"):
        shaped["Allow"] = response["Allow"]
    return shaped


@sync_and_async_middleware
def api_error_shape(get_response):
    """Middleware factory: refuse a NUL in a `/v1/` path; give every `/v1/` error the error shape."""
    if iscoroutinefunction(get_response):

        async def middleware(request):
            return _logged(request, _refused(request) or _shaped(request, await get_response(request)))

    else:

        def middleware(request):
            return _logged(request, _refused(request) or _shaped(request, get_response(request)))

    return middleware


@sync_and_async_middleware
def static_files(get_response):
    """Middleware factory: serve static files with WhiteNoise without making the chain sync.

    WhiteNoise's middleware is sync-only, so Django ran every async view (the claim long-poll)
    inside the process's one thread-sensitive worker thread: a claim waiting 25 s held that
    thread, and every other claim (and every sync view) of the process queued behind it. Here
    WhiteNoise only looks the path up; a static file is served (a cheap file open) and
    anything else goes straight on, async or sync as the chain is.
    """
    from whitenoise.middleware import WhiteNoiseMiddleware

    whitenoise = WhiteNoiseMiddleware(get_response)

    def lookup(request):
        return whitenoise.find_file(request.path_info) if whitenoise.autorefresh else whitenoise.files.get(request.path_info)

    if iscoroutinefunction(get_response):

        async def middleware(request):
            static_file = lookup(request)
            if static_file is not None:
                return whitenoise.serve(static_file, request)
            return await get_response(request)

    else:

        def middleware(request):
            static_file = lookup(request)
            if static_file is not None:
                return whitenoise.serve(static_file, request)
            return get_response(request)

    return middleware


# --- the request span (issue 32 item 6) ---------------------------------------------------------

def _route(request) -> str:
    match = getattr(request, "resolver_match", None)
    route = getattr(match, "route", None) if match is not None else None
    return "/" + route.lstrip("^").rstrip("$") if route else ""


def _finish_span(span, request, response) -> None:
    """Name and close the request span: route template, status, org; never a body, query or header."""
    route = _route(request)
    span.update_name(f"{request.method} {route}" if route else request.method)
    if route:
        span.set_attribute("http.route", route)
    principal = getattr(request, "principal", None)
    org = getattr(principal, "org_slug", None) if principal is not None else None
    if org:
        span.set_attribute("agents.org", org)
    status = getattr(response, "status_code", 500)
    span.set_attribute("http.response.status_code", status)
    if status >= 500:
        span.set_status(error_status(f"HTTP {status}"))


def _start_span(request):
    return tracer().start_as_current_span(request.method, kind=SpanKind.SERVER, record_exception=False,
                                          attributes={"http.request.method": request.method})


@sync_and_async_middleware
def request_span(get_response):
    """Middleware factory: one server span per HTTP request (`http.route` template, status, org).

    The span is current while the view runs, so a run the request executes (`agent.run` →
    `agent.step` → `agent.tool`, `runs.tracing`) is its child. Nothing of the request's body,
    query or headers is recorded.
    """
    if iscoroutinefunction(get_response):

        async def middleware(request):
            with _start_span(request) as span:
                response = await get_response(request)
                _finish_span(span, request, response)
                return response

    else:

        def middleware(request):
            with _start_span(request) as span:
                response = get_response(request)
                _finish_span(span, request, response)
                return response

    return middleware


# --- the permission boundary (issue 50 item 1) ----------------------------------------------------


def request_role(request, row) -> Role | None:
    """Return the `Role` the boundary judges `request` as, or None when the route's own check judges it.

    A principal of an org: `scoped key` (a key limited to some paths), `admin` or `member` (a
    console page counts only a session login). No credential at all: `anonymous`. Anything else —
    an agent token, a machine key alone, a refused credential, a user with no org — is left to the
    route, whose check answers as the row says.
    """
    principal = getattr(request, "principal", None)
    page = not row.path.startswith(API_PREFIX)
    if principal is not None and principal.org_slug:
        if page and principal.via != PrincipalVia.SESSION:
            return Role.ANONYMOUS
        if principal.scope != ApiKeyScope.ALL:
            return Role.SCOPED_KEY
        return Role.ADMIN if principal.is_org_admin else Role.MEMBER
    if principal is not None or getattr(request, "principal_error", None) is not None:
        return None
    if request.META.get("HTTP_AUTHORIZATION") or request.META.get("HTTP_X_TARGET_KEY"):
        return None
    return Role.ANONYMOUS


def _boundary_refusal(request, row, role: Role, access: Access):
    """Return the answer of a refusal the table states (`access`) for `role` on `row`."""
    if not row.path.startswith(API_PREFIX):
        if access == Access.LOGIN or role == Role.ANONYMOUS:
            return redirect_to_login(request.get_full_path())
        if access == Access.NOT_FOUND:
            raise Http404("not found")
        raise PermissionDenied("This page is for the admins of this org.")
    if access == Access.NOT_FOUND:
        error: ApiError = NotFound()
    elif access == Access.UNAUTHENTICATED:
        error = InvalidApiKey()
    elif role == Role.ANONYMOUS:
        error = Forbidden(permissions.NO_PRINCIPAL)
    else:
        error = Forbidden(row.why)
    response = _render(request, error)
    response.agents_render_for_path = True
    return response


class PermissionBoundary:
    """Middleware: answer every refusal the permission table states before the view runs.

    After `tenancy.middleware.PrincipalMiddleware` (the principal is known) and URL resolution
    (`process_view`): the route's row (`agents_site.permissions.row_for`) and the caller's role
    (`request_role`) give an `Access`; `403`, `404` and `login` are answered here, so nothing
    behind the route runs and nothing is stored. A method the route does not serve goes on to the
    route's own 405. A route with no row at all is refused (403): the table is the only way in.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        """Return the refusal the table states for this request, or None to let the view run."""
        match = getattr(request, "resolver_match", None)
        if match is None or match.route is None:
            return None
        path = permissions.route_path(match.route)
        if path == permissions.DJANGO_ADMIN_PATH:
            return None  # the Django admin's own `has_permission` and sign-in page (its row says so)
        row = permissions.row_for(request.method, path)
        if row is None:
            if permissions.routes_of(path):
                return None  # a method the route does not serve: its own 405
            logger.error("route %s has no row in the permission table", path)
            response = _render(request, Forbidden("this route is not in the permission table"))
            response.agents_render_for_path = True
            return response
        role = request_role(request, row)
        if role is None:
            return None
        access = row.access[role]
        if access in (Access.ALLOW, Access.OWN):
            return None
        return _boundary_refusal(request, row, role, access)
