"""ASGI entry point (daphne): Django's HTTP app and the WebSocket routes under Channels' protocol router.

WebSocket: `/v1/identity/ws` (identity agents, authenticated by their agent token).

HTTP requests that wait for a long time without working — the claim long-poll and the SSE
session stream — share a few worker threads instead of owning one each. Django's handler
gives every request its own thread-sensitive context, so each request's first sync step (the
`request_started` signal, the principal lookup) starts a thread that lives until the request
ends: 1,000 waiting claims were 1,000 idle threads (BENCHMARKS.md, issue 16). These routes'
sync steps are short store reads, so they run on `AGENTS_SHARED_REQUEST_THREADS` (4)
single-thread executors taken in turn: every sync step of one request still runs on one
thread, in order (Django's connections are per request, not per thread), and a waiting claim
or an idle stream holds no thread at all.
"""

import itertools
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_site.settings")

import django  # noqa: E402
from asgiref.sync import ThreadSensitiveContext  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402

django.setup(set_prefix=False)

from django.conf import settings  # noqa: E402

# Routes whose requests mostly wait (POST …/claim, GET …/sessions/stream); they share threads.
SHARED_THREAD_PATHS = re.compile(r"^/v1/agents/(targets/[^/]+/claim|sessions/stream)/?$")


class AgentsASGIHandler(ASGIHandler):
    """Django's ASGI handler; requests to `SHARED_THREAD_PATHS` run their sync steps on shared threads."""

    def __init__(self) -> None:
        super().__init__()
        size = max(1, int(getattr(settings, "AGENTS_SHARED_REQUEST_THREADS", 4)))
        self._executors = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="agents-shared") for _ in range(size)]
        self._turn = itertools.cycle(range(size))
        self._turn_lock = threading.Lock()

    def _shared_executor(self) -> ThreadPoolExecutor:
        with self._turn_lock:
            return self._executors[next(self._turn)]

    async def __call__(self, scope, receive, send):
        """Serve one HTTP request; a long-waiting route's sync steps go to a shared executor."""
        if scope["type"] == "http" and SHARED_THREAD_PATHS.match(scope.get("path", "")):
            async with ThreadSensitiveContext(executor=self._shared_executor()):
                await self.handle(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


django_asgi_app = AgentsASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from identity.consumers import IdentityAgentConsumer  # noqa: E402

websocket_routes = [path("v1/identity/ws", IdentityAgentConsumer.as_asgi())]

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": URLRouter(websocket_routes)})
