"""Close an open HTTP request when the credential that authorised it is revoked (`tenancy.revocation`).

The ASGI handler (`server.asgi`) gives every request a `RequestGuard` before the
middleware runs; `tenancy.middleware.PrincipalMiddleware` arms it with the principal it
resolved (`request.agents_revocation(principal)`). When one of the principal's keys is revoked —
its API key, its membership, its org — in this process or another, the guard cancels the
request's work on the server's loop, exactly as a client disconnect does, and ends the answer:

* an answer not yet begun (the claim long-poll waiting, a run answered at its end) gets 403
  `forbidden` in the one error shape (on the OpenAI-compatible path: OpenAI's error object,
  401 `invalid_api_key`);
* an answer already streaming (an SSE stream, a streamed run/chat/OpenAI reply) gets a last
  `: credential revoked` comment and its end, so the client sees the stream close.

Nothing else stops: a run the request started goes on and is recorded (a client that leaves
never stops its run; stop it through its session).
"""

from __future__ import annotations

import asyncio
import json

from tenancy import revocation
from agents_site.errors import Forbidden
from openai_api.errors import InvalidApiKey, error_object

REVOKED_MESSAGE = "the credential of this request was revoked while it was open"
OPENAI_PREFIX = "/v1/agents/openai/"


class RequestGuard:
    """One request's link to the revocation registry (see module doc).

    Create it on the server's loop before the request's principal is resolved; call it with
    the principal (any thread) to arm it; set `task` to the request's work; `finish(send)` at
    the end answers or ends a revoked request; `close()` always.
    """

    __slots__ = ("loop", "since", "path", "task", "fired", "started", "done", "headers", "eager", "principal", "_watch")

    def __init__(self, loop: asyncio.AbstractEventLoop, path: str, *, eager: bool = True) -> None:
        self.loop = loop
        self.since = revocation.mark()
        self.path = path
        self.eager = eager
        self.principal = None
        self.task: asyncio.Task | None = None
        self.fired = False
        self.started = False
        self.done = False
        self.headers = ()
        self._watch = None

    def __call__(self, principal) -> None:
        """Arm the guard for `principal` (called by the principal middleware; any thread).

        An eager guard (an async view: it may wait, like the claim long-poll) registers at once;
        otherwise the principal is kept and `register()` is called only if the answer streams —
        a plain request registers nothing. A revocation in between is not missed: `since`.
        """
        self.principal = principal
        if self.eager:
            self.register()

    def register(self) -> None:
        """Register the request with the revocation registry (once; nothing without a principal)."""
        if self._watch is None and self.principal is not None:
            keys = revocation.principal_keys(self.principal)
            if keys:
                self._watch = revocation.watch(keys, self._revoked, since=self.since)

    def _revoked(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:  # the loop is gone: so is the request
            pass

    def _cancel(self) -> None:
        self.fired = True
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def wrap(self, send):
        """Return `send` recording whether the answer began and ended."""

        async def tracked(message) -> None:
            if message["type"] == "http.response.start":
                self.started = True
                self.headers = message.get("headers") or ()
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                self.done = True
            await send(message)

        return tracked

    async def finish(self, send) -> None:
        """End the answer of a revoked request (see module doc); nothing when not revoked or already ended."""
        if not self.fired or self.done:
            return
        if not self.started:
            status, body = self._refusal()
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]})
            await send({"type": "http.response.body", "body": body})
        else:
            if self._streams_events():  # an SSE client sees why its stream ended
                await send({"type": "http.response.body", "body": b": credential revoked\n\n", "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        self.done = True

    def _streams_events(self) -> bool:
        return any(name.lower() == b"content-type" and value.startswith(b"text/event-stream") for name, value in self.headers)

    def _refusal(self) -> tuple[int, bytes]:
        if self.path.startswith(OPENAI_PREFIX):
            error = InvalidApiKey(REVOKED_MESSAGE)
            return error.status, json.dumps(error_object(error)).encode()

        error = Forbidden(REVOKED_MESSAGE)
        return error.status, json.dumps(error.body()).encode()

    def close(self) -> None:
        """Unregister the request (its connection ended)."""
        if self._watch is not None:
            self._watch.cancel()
