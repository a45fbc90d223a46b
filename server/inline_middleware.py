"""Django's stock middleware, run on the event loop under ASGI instead of one thread hop each.

Django's `MiddlewareMixin.__acall__` runs every `process_request` and `process_response` in
`sync_to_async`: with the seven stock middlewares of `MIDDLEWARE` a request made ~16 thread
hops (≈ 4–5 ms on a 2-core machine, BENCHMARKS.md, issue 16) before any work. None of those
methods does I/O on an API request — they read headers and cookies, set headers, and put
lazy objects (session, user, messages) on the request — so here they run inline on the loop.
The one exception is a write the request itself caused: a session or messages store that was
used is saved in a worker thread, as before. `CsrfViewMiddleware.process_view` (which Django
also adapts with a hop) is a coroutine in async mode. Under WSGI and the test client (sync
mode) each class behaves exactly as Django's.

A request through the chain then makes two hops of its own: the principal lookup
(`tenancy.middleware`) and a sync view (none for an async view).
"""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib.auth.middleware import AuthenticationMiddleware as _Authentication
from django.contrib.messages.middleware import MessageMiddleware as _Messages
from django.contrib.sessions.middleware import SessionMiddleware as _Session
from django.middleware.clickjacking import XFrameOptionsMiddleware as _XFrame
from django.middleware.common import CommonMiddleware as _Common
from django.middleware.csrf import CsrfViewMiddleware as _Csrf
from django.middleware.security import SecurityMiddleware as _Security


class _Inline:
    """Mixin over a `MiddlewareMixin` class: its hooks run on the event loop in async mode."""

    def response_needs_thread(self, request, response) -> bool:
        """Return True when `process_response` may touch a store for this request (then it hops)."""
        return False

    async def __acall__(self, request):
        response = None
        if hasattr(self, "process_request"):
            response = self.process_request(request)
        response = response or await self.get_response(request)
        if hasattr(self, "process_response"):
            if self.response_needs_thread(request, response):
                response = await sync_to_async(self.process_response, thread_sensitive=True)(request, response)
            else:
                response = self.process_response(request, response)
        return response


class SecurityMiddleware(_Inline, _Security):
    """`django.middleware.security.SecurityMiddleware`, inline under ASGI (headers only)."""


class SessionMiddleware(_Inline, _Session):
    """`SessionMiddleware`, inline under ASGI; a session the request used is saved in a thread."""

    def response_needs_thread(self, request, response) -> bool:
        session = getattr(request, "session", None)
        return session is not None and session.accessed


class CommonMiddleware(_Inline, _Common):
    """`django.middleware.common.CommonMiddleware`, inline under ASGI (URL checks, headers)."""


class CsrfViewMiddleware(_Inline, _Csrf):
    """`CsrfViewMiddleware`, inline under ASGI (cookie tokens; the session is never read:
    `CSRF_USE_SESSIONS` is off). Its `process_view` is a coroutine in async mode, so Django
    does not wrap it in a thread hop."""

    def __init__(self, get_response):
        super().__init__(get_response)
        if self.async_mode:
            sync_process_view = self.process_view

            async def process_view(request, callback, callback_args, callback_kwargs):
                return sync_process_view(request, callback, callback_args, callback_kwargs)

            self.process_view = process_view


class AuthenticationMiddleware(_Inline, _Authentication):
    """`AuthenticationMiddleware`, inline under ASGI (it only attaches the lazy user)."""


class MessageMiddleware(_Inline, _Messages):
    """`MessageMiddleware`, inline under ASGI; messages used by the request are stored in a thread."""

    def response_needs_thread(self, request, response) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptionsMiddleware(_Inline, _XFrame):
    """`XFrameOptionsMiddleware`, inline under ASGI (one header)."""
