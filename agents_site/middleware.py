"""Give every error answered under `/v1/` the one error shape, whoever produced it.

The API's own errors are shaped by `agents_site.api`; a few are answered before or around it:
Django's resolver answers an unknown path with an HTML 404, Ninja answers a method a route does
not serve with a text 405, and a fault in a middleware becomes Django's HTML 500. This
middleware, outermost, rewrites any such non-JSON error under `/v1/` as
`{"status", "code", "error"}` (DESIGN §11). Pages outside `/v1/` (admin) are left alone.
"""

from asgiref.sync import iscoroutinefunction
from django.http import JsonResponse
from django.utils.decorators import sync_and_async_middleware

from agents_site.vocabulary import ErrorCode

API_PREFIX = "/v1/"

_CODES = {
    400: ErrorCode.INVALID_REQUEST,
    403: ErrorCode.FORBIDDEN,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.PAYLOAD_TOO_LARGE,
}


def _shaped(request, response):
    if response.status_code < 400 or not request.path.startswith(API_PREFIX):
        return response
    if response.get("Content-Type", "").startswith("application/json"):
        return response
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
    shaped = JsonResponse({"status": status, "code": str(code), "error": message}, status=status)
    if response.has_header("Allow"):
        shaped["Allow"] = response["Allow"]
    return shaped


@sync_and_async_middleware
def api_error_shape(get_response):
    """Middleware factory: rewrite non-JSON error responses under `/v1/` into the error shape."""
    if iscoroutinefunction(get_response):

        async def middleware(request):
            return _shaped(request, await get_response(request))

    else:

        def middleware(request):
            return _shaped(request, get_response(request))

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
