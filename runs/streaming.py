"""A run's reply as Server-Sent Events, written while the run executes (`stream: true`).

Used by `POST /v1/agents/{ref}/run`, `POST /v1/agents/chat` and the OpenAI-compatible
endpoint. The caller starts the run first (`run_start`: every refusal is an ordinary JSON
4xx/5xx, before any byte of the stream), then hands `run_stream` the work that executes it, as
run steps (`runs.drive`). Served by this process's handler, the work waits on the
event loop (`drive_async`: no thread and no connection held while the model writes); under
Django's test client or the stock handler it runs in a worker thread, blocking (`drive`). Either
way it acts inside the org context, and what its `RunListener` hears becomes frames at once:

* `event: start`  `data: {"runId", "sessionId", …}` — first, when the caller gives it;
* `event: delta`  `data: {"text": "..."}` — a piece of the reply (masked; pieces concatenate);
* `event: tool`   `data: {name, args, result|error}` — a tool call executed here;
* `event: ops`    `data: {"ops": [{name, args}]}` — client-executed tool calls handed back;
* then one final frame the work returns (e.g. `event: run` with the recorded run), after which
  the stream ends. `: ping` comments keep an idle connection open.

A stream given `refuse` holds its headers (issue 53): nothing is sent until the work puts its
first frame other than `start` (a piece of the reply, a tool call, handed-back ops: the gateway
answered) or its final frame, at most `AGENTS_SSE_PING_SECONDS` (then the stream opens and pings,
as any stream does). A final frame that comes first is offered to `refuse(event, data)`: the
`HttpResponse` it returns is the answer instead of the stream (a gateway's refusal — a context
overflow, a refused field — as the 400 the same request without `stream` answers); None streams it.

`answer_later` is the same for an answer that is not streamed: the view returns a
`DeferredResponse` the handler awaits on its loop (`agents_site.deferred`).

The work starts when `run_stream` is called, not when the body is first read: a client
that goes away — even before reading a byte — does not stop the run; it finishes and is
recorded as usual (steer or stop it through its session). The body is an async generator (a sync one never streams under
ASGI); `render_frame` is the one frame format, shared with the OpenAI-compatible endpoint's
own `data:` chunks where it needs them.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future

from django.conf import settings
from django.db import close_old_connections
from django.http import HttpResponse, StreamingHttpResponse

from runs.drive import Steps, drive, drive_async, start_on_loop
from agents_site.deferred import DeferredResponse, serving_loop
from agents_site.errors import error_response
from agents_site.vocabulary import ErrorCode, ReplyFrame
from tenancy import stores
from tenancy.faults import store_fault

logger = logging.getLogger(__name__)

_FINAL = object()


def render_frame(event: str | None, data) -> str:
    """Return one SSE frame: `event: <event>` (omitted when None) and one `data:` line of compact JSON
    (a `str` `data` is sent as it is, e.g. `[DONE]`)."""
    body = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (f"event: {event}\n" if event else "") + f"data: {body}\n\n"


class _Channel:
    """Frames from the worker thread to the response: buffered until the response's event loop
    attaches, then handed to its asyncio queue. The worker never waits on the client."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buffer: list = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self.first: Future = Future()  # the first item that is not `start` (a held stream's answer waits on it)

    def put(self, item) -> None:
        """Hand one `(event, data)` item on (thread-safe; dropped once the response's loop is gone)."""
        with self._lock:
            if item[0] != ReplyFrame.START and not self.first.done():
                self.first.set_result(item)
            if self._loop is None:
                self._buffer.append(item)
                return
            loop, queue = self._loop, self._queue
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the response's loop is gone: the client left, the run goes on
            pass

    def attach(self, loop: asyncio.AbstractEventLoop) -> asyncio.Queue:
        """Return the queue the response reads, holding everything put so far."""
        queue: asyncio.Queue = asyncio.Queue()
        with self._lock:
            for item in self._buffer:
                queue.put_nowait(item)
            self._buffer.clear()
            self._loop, self._queue = loop, queue
        return queue


class QueueListener:
    """A run listener (the `RunListener` methods `delta`, `tool`, `ops`: `agents.execution.loop`)
    that turns what it hears into `(event, data)` frames for the stream."""

    def __init__(self, channel: _Channel, also=None) -> None:
        self._channel = channel
        self._also = also

    def put(self, event: str, data) -> None:
        """Queue one frame for the stream (thread-safe; never blocks)."""
        self._channel.put((event, data))

    def delta(self, text: str) -> None:
        """Queue `event: delta` `{"text"}`."""
        self.put(ReplyFrame.DELTA, {"text": text})
        if self._also:
            self._also.delta(text)

    def tool(self, action: dict) -> None:
        """Queue `event: tool` with the action."""
        self.put(ReplyFrame.TOOL, action)
        if self._also:
            self._also.tool(action)

    def ops(self, ops: list[dict]) -> None:
        """Queue `event: ops` `{"ops"}`."""
        self.put(ReplyFrame.OPS, {"ops": ops})
        if self._also:
            self._also.ops(ops)


def run_headers(response, run):
    """Return `response` with `X-Agents-Run-Id` / `X-Agents-Session-Id` naming `run` (the
    session header only when the run has one)."""
    response["X-Agents-Run-Id"] = run.id
    if run.session_id:
        response["X-Agents-Session-Id"] = run.session_id
    return response


def in_org(org: str, steps: Steps):
    """Return `steps` run inside `stores.org_context(org)` (run steps too: the context lasts across waits)."""
    with stores.org_context(org):
        return (yield from steps)


def run_stream(
    *,
    org: str,
    work: Callable[[QueueListener], Steps[tuple[str | None, object]]],
    frame: Callable[[str, object], str | None] = render_frame,
    also=None,
    start: dict | None = None,
    refuse: Callable[[str, object], HttpResponse | None] | None = None,
) -> HttpResponse:
    """Answer `text/event-stream` while `work(listener)` executes a started run.

    In: the org slug (from the principal; the work acts inside `stores.org_context(org)`),
    `work` — run steps (`runs.drive`) that execute the run, calling the listener as
    the reply is written, and return the final frame `(event, data)`; on this process's event
    loop when the request came through its handler, else in a worker thread; `frame(event, data)` renders each frame (default
    `render_frame`; return None to send nothing for a frame); `also`, a second listener;
    `start`, the data of an opening `event: start` frame sent before anything else (the run's
    `runId` and `sessionId`, so a client can watch or stop it while it streams); `refuse`, given
    the final frame when it comes before any other frame (see the module doc: the headers are held
    until then), returns the answer to send instead of the stream, or None.
    Out: a 200 streaming response, not cached, not buffered — with `refuse`, that or what `refuse`
    answered, decided once the first frame is known (a `DeferredResponse` awaited on this process's
    loop, or, under Django's test client and the stock handler, decided here). A failure inside `work` ends the
    stream with `event: error` `{"status": 500, "code": "internal_error", "error"}` (the run
    itself is recorded by its lifecycle, whatever happens here).
    """
    channel = _Channel()
    listener = QueueListener(channel, also)
    failed = (ReplyFrame.ERROR, {"status": 500, "code": ErrorCode.INTERNAL, "error": "internal error"})
    loop = serving_loop()
    # The request's thread holds no connection while the stream lasts: the work takes its own
    # for each transaction (a live stream needs none while the model works).
    stores.release_connections()
    # The run goes on now, whether or not the client ever reads the body: a started run always
    # finishes and is recorded (a client that leaves early loses only the frames).
    if loop is not None:
        context = contextvars.copy_context()

        async def main() -> None:
            try:
                final = await drive_async(in_org(org, work(listener)), context=context)
            except Exception:
                logger.exception("a streamed run failed")
                final = failed
            channel.put((_FINAL, final))

        start_on_loop(loop, main)
    else:

        def execute() -> None:
            final: tuple[str | None, object]
            try:
                final = drive(in_org(org, work(listener)))
            except Exception:
                logger.exception("a streamed run failed in its worker thread")
                final = failed
            finally:
                close_old_connections()
            channel.put((_FINAL, final))

        threading.Thread(target=execute, name="agents-stream", daemon=True).start()
    if refuse is None:
        return stream_response(_frames(channel=channel, frame=frame, start=start))
    return _held(channel=channel, loop=loop, answer=lambda first: _first_answer(first, channel=channel, frame=frame, start=start,
                                                                                 refuse=refuse))


def _hold_seconds() -> float:
    """Return how long a held stream waits for its first frame before it opens (the ping interval)."""
    return max(float(getattr(settings, "AGENTS_SSE_PING_SECONDS", 25)), 0.05)


def _held(*, channel: _Channel, loop: asyncio.AbstractEventLoop | None, answer: Callable[[tuple | None], HttpResponse]) -> HttpResponse:
    """Return `answer(first)` once the channel's first frame that is not `start` is known (None when
    none came within `_hold_seconds`): awaited on `loop` (a `DeferredResponse`: no thread waits), or
    waited for here when there is no loop."""
    if loop is None:
        try:
            first = channel.first.result(timeout=_hold_seconds())
        except TimeoutError:
            first = None
        return answer(first)

    async def main() -> HttpResponse:
        waiting = asyncio.wrap_future(channel.first)
        done, _ = await asyncio.wait({waiting}, timeout=_hold_seconds())  # not cancelled: the work may still put it
        return answer(waiting.result() if done else None)

    return DeferredResponse(asyncio.run_coroutine_threadsafe(main(), loop), on_error=_error_answer)


def _first_answer(first: tuple | None, *, channel: _Channel, frame, start, refuse) -> HttpResponse:
    """Return what `refuse` answers for a final frame that came first, else the stream."""
    if first is not None and first[0] is _FINAL:
        refused = refuse(*first[1])
        if refused is not None:
            return refused
    return stream_response(_frames(channel=channel, frame=frame, start=start))


def answer_later(*, org: str, work: Callable[[], Steps], on_error: Callable[[Exception], object] | None = None):
    """Return the answer `work()` computes for a started run, its wait on the model on the event loop.

    In: the org slug (from the principal), `work` — run steps returning the `HttpResponse` to
    send (raising an `ApiError` answers it in the error shape), and `on_error(exc)` rendering
    what the work raised (default: an `ApiError` as the error shape, a store fault as its 503,
    anything else 500 `internal_error`). Served by this process's handler: a `DeferredResponse`
    (`agents_site.deferred`) at once — the request's thread and connections handed back, the run
    awaited on the loop to its end even if the client leaves. Otherwise (Django's test client,
    the stock handler): the work driven here, blocking, and its answer (what it raises propagates).
    """
    loop = serving_loop()
    if loop is None:
        return drive(work())
    context = contextvars.copy_context()

    async def main():
        return await drive_async(in_org(org, work()), context=context)

    stores.release_connections()
    return DeferredResponse(start_on_loop(loop, main), on_error=on_error or _error_answer)


def _error_answer(exc: Exception):
    fault = store_fault(exc)
    return error_response(fault) if fault is not None else None  # None: DeferredResponse renders the rest


def stream_response(body: AsyncIterator[str]) -> StreamingHttpResponse:
    """Return `body` as a `text/event-stream` response that no proxy buffers or caches."""
    response = StreamingHttpResponse(body, content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


async def _frames(*, channel: _Channel, frame, start) -> AsyncIterator[str]:
    if start is not None:
        opening = frame(ReplyFrame.START, start)
        if opening:
            yield opening
    queue = channel.attach(asyncio.get_running_loop())
    ping = max(float(getattr(settings, "AGENTS_SSE_PING_SECONDS", 25)), 0.05)
    while True:
        try:
            event, data = await asyncio.wait_for(queue.get(), timeout=ping)
        except TimeoutError:
            yield ": ping\n\n"
            continue
        if event is _FINAL:
            final_event, final_data = data
            rendered = frame(final_event, final_data)
            if rendered:
                yield rendered
            return
        rendered = frame(event, data)
        if rendered:
            yield rendered
