"""`/v1/agents/mcp`: the `mcp` SDK's streamable-HTTP transport, served by a Django async view.

The view authenticates the request like every route (the principal middleware: API key of
scope `all` or `mcp`, or a gateway JWT; 403 in the one error shape otherwise) and hands the
request to the SDK's `StreamableHTTPSessionManager` as an ASGI call: the SDK parses and answers
JSON-RPC (its errors are the protocol's: `-32700` parse error, `-32600` invalid request, `-32601`
unknown method, `-32602` bad params), keeps legacy sessions (`Mcp-Session-Id`) and serves
2026-07-28 single exchanges. What the SDK sends is streamed back as the Django response; when
the client leaves, the SDK hears `http.disconnect` (a 2026-07-28 cancellation).

The session manager is started lazily, on the serving loop, by the first request (daphne sends
no ASGI lifespan events), and kept for the process's life; one per event loop (the tests' own
loops each get theirs). Legacy sessions are stateful so that a `notifications/cancelled`, sent in
a request of its own, reaches the call in flight (decision record 1541); a session belongs to the
key that opened it, and every request of it is authenticated again — a revoked key's next
request is 403, and one in flight is closed by the revocation broadcast (`tenancy.revocation`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import weakref

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from agents_site.errors import ApiError, error_response
from agents_site.vocabulary import ErrorCode
from mcp_server import access
from mcp_server.server import PRINCIPAL_KEY, REQUEST_ID_KEY, build_server

logger = logging.getLogger(__name__)

REQUEST_ID_MAX = 128
_server = None
_managers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_starting: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _idle_seconds() -> float:
    return max(float(settings.AGENTS_MCP_SESSION_IDLE_SECONDS), 1.0)


async def _run_manager(manager: StreamableHTTPSessionManager, started: asyncio.Future) -> None:
    try:
        async with manager.run():
            started.set_result(manager)
            await asyncio.Event().wait()  # the manager lives as long as its loop
    except BaseException as exc:
        if not started.done():
            started.set_exception(exc)
        raise


async def session_manager() -> StreamableHTTPSessionManager:
    """Return this loop's running session manager, starting it on the first call (lazily: daphne
    sends no lifespan event to start it with)."""
    global _server
    loop = asyncio.get_running_loop()
    manager = _managers.get(loop)
    if manager is not None:
        return manager
    started = _starting.get(loop)
    if started is None:
        if _server is None:
            _server = build_server()
        created = StreamableHTTPSessionManager(app=_server, stateless=False, session_idle_timeout=_idle_seconds())
        started = _starting[loop] = loop.create_future()
        task = loop.create_task(_run_manager(created, started), name="mcp-session-manager")
        started.add_done_callback(lambda _f, t=task: t)  # keep the task referenced with its future
        _starting[loop] = started
    manager = await asyncio.shield(started)
    _managers[loop] = manager
    return manager


def _request_id(request) -> str:
    given = (request.headers.get("X-Request-Id") or "").strip()
    return given[:REQUEST_ID_MAX] if given else "req_" + secrets.token_hex(12)


def _scope(request, principal) -> dict:
    """Return the ASGI scope the SDK sees: the request's, with the caller's principal and the
    `user` the SDK binds a legacy session to (the key, or the JWT subject, of the org)."""
    owner = f"{principal.org_slug}/key:{principal.api_key_id}" if principal.api_key_id else f"{principal.org_slug}/{principal.subject}"
    user = AuthenticatedUser(AccessToken(token="", client_id=owner, scopes=[], subject=principal.subject))
    headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in request.headers.items()]
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
            "scheme": request.scheme, "path": request.path, "raw_path": request.path.encode(), "root_path": "",
            "query_string": request.META.get("QUERY_STRING", "").encode("latin-1"), "headers": headers,
            "server": (request.get_host().rsplit(":", 1)[0], int(request.get_port() or 80)), "client": None,
            "user": user, "state": {}, PRINCIPAL_KEY: principal, REQUEST_ID_KEY: _request_id(request)}


class McpFailed(ApiError):
    """500: the MCP SDK answered nothing to a request (a fault, logged)."""

    status = 500
    code = ErrorCode.INTERNAL
    default_message = "the MCP server failed to answer this request"


class _Exchange:
    """One ASGI call of the SDK's app, read as a Django answer: the start message, then the body pieces."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent_body = False
        self.left = asyncio.Event()
        self.start: asyncio.Future = asyncio.get_running_loop().create_future()
        self.pieces: asyncio.Queue = asyncio.Queue()

    async def receive(self) -> dict:
        if not self.sent_body:
            self.sent_body = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        if message["type"] == "http.response.start":
            if not self.start.done():
                self.start.set_result(message)
        elif message["type"] == "http.response.body":
            self.pieces.put_nowait((message.get("body", b""), message.get("more_body", False)))


async def _served(app_task: asyncio.Task, exchange: _Exchange):
    """Yield the SDK's body pieces until its last one; on leaving early, tell the SDK the client left."""
    try:
        while True:
            getter = asyncio.ensure_future(exchange.pieces.get())
            done, _ = await asyncio.wait({getter, app_task}, return_when=asyncio.FIRST_COMPLETED)
            if getter not in done:
                getter.cancel()
                while not exchange.pieces.empty():
                    piece, _more = exchange.pieces.get_nowait()
                    if piece:
                        yield piece
                return
            piece, more = getter.result()
            if piece:
                yield piece
            if not more:
                return
    finally:
        exchange.left.set()
        if not app_task.done():
            try:
                await asyncio.wait_for(asyncio.shield(app_task), timeout=5)
            except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
                app_task.cancel()


def _headers(start: dict) -> list[tuple[str, str]]:
    return [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])]


@csrf_exempt
async def endpoint(request):
    """`POST | GET | DELETE /v1/agents/mcp`: one MCP streamable-HTTP request (see the module text)."""
    try:
        principal = await sync_to_async(access.bearer, thread_sensitive=False)(request)
    except ApiError as exc:
        return error_response(exc)
    manager = await session_manager()
    exchange = _Exchange(request.body)
    app_task = asyncio.ensure_future(manager.handle_request(_scope(request, principal), exchange.receive, exchange.send))
    try:
        await asyncio.wait({exchange.start, app_task}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        exchange.left.set()
        app_task.cancel()
        raise
    if not exchange.start.done():  # the SDK answered nothing (it failed): say so in the one shape
        exchange.left.set()
        if app_task.exception() is not None:
            logger.error("the MCP server failed a request", exc_info=app_task.exception())
        return error_response(McpFailed())
    start = exchange.start.result()
    headers = _headers(start)
    streamed = any(k.lower() == "content-type" and v.startswith("text/event-stream") for k, v in headers)
    if streamed:
        response = StreamingHttpResponse(_served(app_task, exchange), status=start["status"])
        response["X-Accel-Buffering"] = "no"
    else:
        body = b"".join([piece async for piece in _served(app_task, exchange)])
        response = HttpResponse(body, status=start["status"])
    for name, value in headers:
        if name.lower() != "content-length":
            response[name] = value
    return response
