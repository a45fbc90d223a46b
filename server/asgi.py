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

Every other request's sync step gets a thread of its own, reused: Django starts a new thread
for each request and joins it at the end (about a tenth of a single event append's CPU). Here
a request's sync step takes an idle single-thread executor from `ExecutorPool` (or a new one,
up to `AGENTS_REQUEST_THREADS` at once: a burst of 500 requests waits on the loop for a thread
instead of starting 500), uses it alone, and hands it back as the step ends — not when the
answer has been sent; one still running work the request abandoned (a client gone mid-run) is
not handed back but retired, so no later request ever queues behind another's work. A read
(GET, HEAD, OPTIONS) takes its thread from a lane of its own (`AGENTS_READ_REQUEST_THREADS`,
2): a burst of 500 run starts queued for the write lane never makes a page or a list wait
behind it (`GET /v1/agents` during 500 starts waited 5–11 s in the one queue; issue 26).

A view that starts a run answers with a `DeferredResponse` (`agents_site.deferred`): the run
goes on as async work on this loop, and the handler awaits it here and sends its answer — the
request holds no thread while the model writes (issue 26). The view knows it may defer by
`serving_loop()`, set for every request this handler serves.

A request for a sync view crosses into a thread ONCE: the `request_started` signal, the whole
middleware chain in Django's sync mode, the view and (for a response that is not streamed)
closing it all run in one call on the request's thread (`_SyncChain`), and the loop only
reads the body, resolves the URL (to tell a sync view from an async one) and sends the
answer. Django's ASGI handler instead runs the chain in async mode, where each sync step is
its own hop and every middleware a coroutine layer: a sync API request cost ≈ 2.5× the CPU of
the same request through Django's sync handler (BENCHMARKS.md, issue 16). An async view (the
claim long-poll, the SSE streams) keeps the async chain, whose stock middlewares run inline on
the loop (`server.inline_middleware`).
"""

import asyncio
import itertools
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agents_site.settings")

import django  # noqa: E402
from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async  # noqa: E402
from django.core import signals  # noqa: E402
from django.core.exceptions import RequestAborted  # noqa: E402
from django.core.handlers.asgi import ASGIHandler, get_script_prefix  # noqa: E402
from django.core.handlers.base import BaseHandler  # noqa: E402
from django.http import FileResponse  # noqa: E402
from django.urls import Resolver404, get_resolver, set_script_prefix  # noqa: E402

django.setup(set_prefix=False)

from django.conf import settings  # noqa: E402

from agents_site.deferred import DeferredResponse, serve_on  # noqa: E402
from server.heap import settle as settle_heap  # noqa: E402
from server.revocation_guard import RequestGuard  # noqa: E402
from tenancy import revocation  # noqa: E402

# Routes whose requests mostly wait (POST …/claim, GET …/sessions/stream); they share threads.
SHARED_THREAD_PATHS = re.compile(r"^/v1/agents/(targets/[^/]+/claim|sessions/stream)/?$")
# Methods that only read: their requests take a thread from the read lane.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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
    `acquire()` / `release()` bound how many are in use at once (`limit`; None: no bound).
    """

    def __init__(self, idle_max: int, limit: int | None = None) -> None:
        self.idle_max = idle_max
        self._idle: list[_CountingExecutor] = []
        self._lock = threading.Lock()
        self._slots = asyncio.Semaphore(limit) if limit else None

    async def acquire(self) -> _CountingExecutor:
        """Wait (on the loop) until fewer than `limit` executors are in use; return one."""
        if self._slots is not None:
            await self._slots.acquire()
        return self.take()

    def release(self, executor: _CountingExecutor) -> None:
        """Hand back an executor `acquire` returned."""
        self.give(executor)
        if self._slots is not None:
            self._slots.release()

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


class _SyncChain(BaseHandler):
    """Django's middleware chain loaded in sync mode, for requests to sync views (see the module text).

    `resolve_request` takes the match the loop already found (`request.agents_match`), so the
    URL is resolved once per request.
    """

    def __init__(self) -> None:
        super().__init__()
        self.load_middleware(is_async=False)

    def resolve_request(self, request):
        """Return the request's resolver match: the one found on the loop, unless a middleware set another urlconf."""
        match = getattr(request, "agents_match", None)
        if match is None or hasattr(request, "urlconf"):
            return super().resolve_request(request)
        request.resolver_match = match
        return match


class AgentsASGIHandler(ASGIHandler):
    """Django's ASGI handler; a sync view's request crosses into a thread once (`_SyncChain`), and
    requests to `SHARED_THREAD_PATHS` run their sync steps on shared threads."""

    def __init__(self) -> None:
        super().__init__()
        size = max(1, int(getattr(settings, "AGENTS_SHARED_REQUEST_THREADS", 4)))
        self._executors = [ThreadPoolExecutor(max_workers=1, thread_name_prefix="agents-shared") for _ in range(size)]
        self._turn = itertools.cycle(range(size))
        self._turn_lock = threading.Lock()
        idle = max(0, int(getattr(settings, "AGENTS_IDLE_REQUEST_THREADS", 16)))
        self._request_executors = ExecutorPool(idle, limit=max(1, int(getattr(settings, "AGENTS_REQUEST_THREADS", 8))))
        self._read_executors = ExecutorPool(idle, limit=max(1, int(getattr(settings, "AGENTS_READ_REQUEST_THREADS", 2))))
        self._sync_chain = _SyncChain()

    def _shared_executor(self) -> ThreadPoolExecutor:
        with self._turn_lock:
            return self._executors[next(self._turn)]

    async def __call__(self, scope, receive, send):
        """Serve one HTTP request; a long-waiting route's sync steps go to a shared executor,
        a sync view's step to an executor of its own taken from the pool (`handle`)."""
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        async with ThreadSensitiveContext(executor=self._shared_executor()):
            await self.handle(scope, receive, send)

    async def _serve_sync_view(self, request, scope):
        """Run a sync view's request (`_serve_in_thread`) on an executor of its own, handed back
        as soon as the view has answered (a deferred answer is awaited after, with no thread);
        a read (`READ_METHODS`) from the read lane, every other request from the write lane."""
        pool = self._read_executors if request.method in READ_METHODS else self._request_executors
        executor = await pool.acquire()
        try:
            return await sync_to_async(self._serve_in_thread, thread_sensitive=False, executor=executor)(request, scope)
        finally:
            pool.release(executor)

    @staticmethod
    def _sync_view_match(request):
        """Return the URL match of `request` when its view is sync (None for an async view).

        A path no route serves counts as sync: the chain answers its 404.
        """
        try:
            match = get_resolver().resolve(request.path_info)
        except Resolver404:
            return False
        return None if iscoroutinefunction(match.func) else match

    def _serve_in_thread(self, request, scope):
        """Serve a sync view's request in the calling thread: request_started, the sync chain, the
        view, and closing a response that is not streamed (its body is bytes already)."""
        signals.request_started.send(sender=self.__class__, scope=scope)
        response = self._sync_chain.get_response(request)
        response._handler_class = self.__class__
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        if not response.streaming:
            response.close()  # request_finished (closes this request's connections) before the answer is sent
            response.agents_closed = True
        return response

    async def handle(self, scope, receive, send):
        """Serve one HTTP request (Django 5.2's `ASGIHandler.handle`, with the one-crossing branch
        for sync views): read the body, answer while listening for a disconnect, close."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            await signals.request_started.asend(sender=self.__class__, scope=scope)
            body_file.close()
            await self.send_response(error_response, send)
            await sync_to_async(error_response.close)()
            return
        serve_on(asyncio.get_running_loop())  # a view that starts a run may answer later, on this loop
        match = self._sync_view_match(request)
        # Armed by the principal middleware (server.revocation_guard): an async view may wait,
        # so it registers at once; a sync view's answer registers only if it streams.
        guard = RequestGuard(asyncio.get_running_loop(), request.path, eager=match is None)
        request.agents_revocation = guard
        send = guard.wrap(send)
        if match is None:
            await signals.request_started.asend(sender=self.__class__, scope=scope)
            get_response = self.run_get_response
        else:
            if match is not False:
                request.agents_match = match
            shared = SHARED_THREAD_PATHS.match(request.path_info)
            serve = sync_to_async(self._serve_in_thread, thread_sensitive=True) if shared else None

            async def get_response(request):
                return await serve(request, scope) if serve is not None else await self._serve_sync_view(request, scope)

        async def process_request(request, send):
            response = await get_response(request)
            if isinstance(response, DeferredResponse):  # the run goes on here, on the loop: await its answer
                response = await response.settled()
            if response.streaming:
                guard.register()
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client disconnected while the answer was being sent
            return response

        # Django's order: the disconnect listener first, so a failure there cannot stop the answer being cancelled.
        tasks = [asyncio.create_task(self.listen_for_disconnect(receive)), asyncio.create_task(process_request(request, send))]
        guard.task = tasks[1]
        if guard.fired:  # revoked before the work was created
            tasks[1].cancel()
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                try:
                    task.result()
                except RequestAborted:
                    pass
                except asyncio.CancelledError:
                    pass  # the work cancelled by a revocation (the guard): answered below
                except AssertionError:
                    body_file.close()
                    raise
            else:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            await signals.request_finished.asend(sender=self.__class__)
        else:
            if not getattr(response, "agents_closed", False):
                await sync_to_async(response.close)()
        guard.close()
        try:
            await guard.finish(send)  # a revoked credential: answer 403, or end the stream
        except Exception:  # the client is gone already
            pass
        body_file.close()


# AGENTS_FAST_HANDLER off: Django's own handler (and Django's own middleware, settings.py).
django_asgi_app = AgentsASGIHandler() if settings.AGENTS_FAST_HANDLER else ASGIHandler()
revocation.start()  # join the revocation broadcast now: a connection opened later is closed by it

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import path  # noqa: E402

from identity.consumers import IdentityAgentConsumer  # noqa: E402

websocket_routes = [path("v1/identity/ws", IdentityAgentConsumer.as_asgi())]

application = ProtocolTypeRouter({"http": django_asgi_app, "websocket": URLRouter(websocket_routes)})

settle_heap()  # start-up's objects leave the collector's walk (AGENTS_GC_FREEZE; server.heap)
