"""An answer computed on the event loop after the view returned (issue 26 item 1).

A sync view that starts a run (`POST …/run`, `POST /v1/agents/chat`, the OpenAI-compatible
completion) checks, gates and records it in its request thread — every refusal an ordinary
4xx — and then, when the request is served by this process's handler (`server.asgi`),
returns a `DeferredResponse`: the run goes on as async work on the server's event loop, and the
handler awaits it there and sends what it answers. The request's thread is handed back at
once; the wait on the model holds no thread and no database connection.

`serving_loop()` tells a view whether it may defer: the handler sets the loop for the request
(a `contextvars` variable, copied into the view's thread). Under Django's test client or the
stock handler (`AGENTS_FAST_HANDLER` off) there is none, and the view answers in its thread as
before — the same code, driven blocking.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from concurrent.futures import Future

from django.http import HttpResponse, JsonResponse

from agents_site.errors import ApiError, InternalError, error_response

logger = logging.getLogger(__name__)

_serving: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar("agents_serving_loop", default=None)

#: Headers of the placeholder (set by middleware) that the real answer keeps its own of.
_OWN_HEADERS = frozenset({"content-type", "content-length"})


def serving_loop() -> asyncio.AbstractEventLoop | None:
    """Return the event loop serving the current request when a view may answer with a
    `DeferredResponse` (the request came through `server.asgi`), else None."""
    return _serving.get()


def serve_on(loop: asyncio.AbstractEventLoop | None) -> contextvars.Token:
    """Mark the current context's request as served by `loop` (the handler, before the view runs);
    return the token that `contextvars.ContextVar.reset` takes."""
    return _serving.set(loop)


class DeferredResponse(HttpResponse):
    """A placeholder answer: the real one is `future`'s result (an `HttpResponse`), awaited by the
    handler on its event loop (`settled`). Middleware sees the placeholder; the headers it sets
    (security headers, cookies) are carried over to the real answer.

    `on_error(exc)` renders an exception the work raised, or returns None to leave it to the
    default: an `ApiError` as the error shape, anything else a 500 `internal_error`.
    """

    def __init__(self, future: Future, *, on_error=None) -> None:
        super().__init__(status=202)
        self.future = future
        self.on_error = on_error

    async def settled(self) -> HttpResponse:
        """Await the work (shielded: a client that leaves does not cancel it) and return the answer
        to send, carrying the placeholder's headers and cookies."""
        try:
            response = await asyncio.shield(asyncio.wrap_future(self.future))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            response = self._rendered(exc)
        for name, value in self.items():
            if name.lower() not in _OWN_HEADERS and not response.has_header(name):
                response[name] = value
        for name, cookie in self.cookies.items():
            response.cookies.setdefault(name, cookie)
        response.agents_closed = True  # the placeholder's close ended the request's sync part already
        return response

    def _rendered(self, exc: Exception) -> HttpResponse:
        if self.on_error is not None:
            try:
                rendered = self.on_error(exc)
            except Exception:
                logger.exception("rendering a deferred answer's error failed")
                rendered = None
            if rendered is not None:
                return rendered
        if isinstance(exc, ApiError):
            return error_response(exc)
        logger.error("a deferred answer failed", exc_info=exc)
        return JsonResponse(InternalError("internal error").body(), status=500)
