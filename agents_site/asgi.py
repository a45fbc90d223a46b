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

Every other request gets a thread of its own as Django gives it, but the thread is reused:
Django starts a new thread for each request and joins it at the end (about a tenth of a
single event append's CPU). Here a request takes an idle single-thread executor from
`ExecutorPool` (or a new one), uses it alone, and hands it back at its end; one still running
work the request abandoned (a client gone mid-run) is not handed back but retired, so no later
request ever queues behind another's work.
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


class _CountingExecutor(ThreadPoolExecutor):
    """One thread; counts the calls submitted and not yet finished (`busy`)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="agents-request")
        self._busy = 0
        self._busy_lock = threading.Lock()

    def submit(self, fn, /, *args, **kwargs):
        """Run `fn(*args, **kwargs)` on this executor's thread; return its future."""
        with self._busy_lock:
            self._busy += 1
        try:
            future = super().submit(fn, *args, **kwargs)
        except BaseException:
            self._done(None)
            raise
        future.add_done_callback(self._done)
        return future

    def _done(self, _future) -> None:
        with self._busy_lock:
            self._busy -= 1

    @property
    def busy(self) -> bool:
        """Return True while a submitted call has not finished."""
        with self._busy_lock:
            return self._busy > 0


class ExecutorPool:
    """Idle single-thread executors for requests, each used by one request at a time.

    `take()` → an idle executor or a new one; `give(executor)` keeps it for the next request
    unless it is still busy (work a cancelled request left running) or `idle_max` are already
    idle — then it is shut down without waiting (its thread ends after its last call).
    """

    def __init__(self, idle_max: int) -> None:
        self.idle_max = idle_max
        self._idle: list[_CountingExecutor] = []
        self._lock = threading.Lock()

    def take(self) -> _CountingExecutor:
        """Return an idle executor, or a new one."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        return _CountingExecutor()

    def give(self, executor: _CountingExecutor) -> None:
        """Keep `executor` for the next request, or retire it (busy, or the pool is full)."""
        if not executor.busy:
            with self._lock:
                if len(self._idle) < self.idle_max:
                    self._idle.append(executor)
                    return
        executor.shutdown(wait=False)


class AgentsASGIHandler(ASGIHandler):
    """Django's ASGI handler; requests to `SHARED_THREAD_PATHS` run their sync steps on shared threads."""

    def __init__(self) -> None:
        super().__init__()
        size = max(1, int(getattr(settings, "AGENTS_SHARED_REQUEST_THREADS", 4)))
        self._executors = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="agents-shared") for _ in range(size)]
        self._turn = itertools.cycle(range(size))
        self._turn_lock = threading.Lock()
        self._request_executors = ExecutorPool(max(0, int(getattr(settings, "AGENTS_IDLE_REQUEST_THREADS", 16))))

    def _shared_executor(self) -> ThreadPoolExecutor:
        with self._turn_lock:
            return self._executors[next(self._turn)]

    async def __call__(self, scope, receive, send):
        """Serve one HTTP request; a long-waiting route's sync steps go to a shared executor,
        every other request's to an executor of its own taken from the pool."""
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        if SHARED_THREAD_PATHS.match(scope.get("path", "")):
            async with ThreadSensitiveContext(executor=self._shared_executor()):
                await self.handle(scope, receive, send)
            return
        executor = self._request_executors.take()
        try:
            async with ThreadSensitiveContext(executor=executor):
                await self.handle(scope, receive, send)
        finally:
            self._request_executors.give(executor)


django_asgi_app = AgentsASGIHandler()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from identity.consumers import IdentityAgentConsumer  # noqa: E402

websocket_routes = [path("v1/identity/ws", IdentityAgentConsumer.as_asgi())]

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": URLRouter(websocket_routes)})
