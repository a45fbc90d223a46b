"""A run's reply as Server-Sent Events, written while the run executes (`stream: true`).

Used by `POST /v1/agents/{ref}/run`, `POST /v1/agents/chat` and the OpenAI-compatible
endpoint. The caller starts the run first (`run_start`: every refusal is an ordinary JSON
4xx/5xx, before any byte of the stream), then hands `run_stream` the work that executes it.
The work runs in a worker thread inside the org context; what its `RunListener` hears becomes
frames at once:

* `event: start`  `data: {"runId", "sessionId", …}` — first, when the caller gives it;
* `event: delta`  `data: {"text": "..."}` — a piece of the reply (masked; pieces concatenate);
* `event: tool`   `data: {name, args, result|error}` — a tool call executed here;
* `event: ops`    `data: {"ops": [{name, args}]}` — client-executed tool calls handed back;
* then one final frame the work returns (e.g. `event: run` with the recorded run), after which
  the stream ends. `: ping` comments keep an idle connection open.

The worker starts when `run_stream` is called, not when the body is first read: a client
that goes away — even before reading a byte — does not stop the run; it finishes and is
recorded as usual (steer or stop it through its session). The body is an async generator (a sync one never streams under
ASGI); `render_frame` is the one frame format, shared with the OpenAI-compatible endpoint's
own `data:` chunks where it needs them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Callable

from django.conf import settings
from django.db import close_old_connections
from django.http import StreamingHttpResponse

from agents.execution.loop import RunListener
from agents_site.vocabulary import ErrorCode, ReplyFrame
from tenancy import stores

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

    def put(self, item) -> None:
        """Hand one `(event, data)` item on (thread-safe; dropped once the response's loop is gone)."""
        with self._lock:
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


class QueueListener(RunListener):
    """A `RunListener` that turns what it hears into `(event, data)` frames for the stream."""

    def __init__(self, channel: _Channel, also: RunListener | None = None) -> None:
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


def run_stream(
    *,
    org: str,
    work: Callable[[QueueListener], tuple[str | None, object]],
    frame: Callable[[str, object], str | None] = render_frame,
    also: RunListener | None = None,
    start: dict | None = None,
) -> StreamingHttpResponse:
    """Answer `text/event-stream` while `work(listener)` executes a started run in a worker thread.

    In: the org slug (from the principal; the thread acts inside `stores.org_context(org)`),
    `work` — executes the run, calling the listener as the reply is written, and returns the
    final frame `(event, data)`; `frame(event, data)` renders each frame (default
    `render_frame`; return None to send nothing for a frame); `also`, a second listener;
    `start`, the data of an opening `event: start` frame sent before anything else (the run's
    `runId` and `sessionId`, so a client can watch or stop it while it streams).
    Out: a 200 streaming response, not cached, not buffered. A failure inside `work` ends the
    stream with `event: error` `{"status": 500, "code": "internal_error", "error"}` (the run
    itself is recorded by its lifecycle, whatever happens here).
    """
    channel = _Channel()
    listener = QueueListener(channel, also)

    def execute() -> None:
        final: tuple[str | None, object]
        try:
            with stores.org_context(org):
                final = work(listener)
        except Exception:
            logger.exception("a streamed run failed in its worker thread")
            final = (ReplyFrame.ERROR, {"status": 500, "code": ErrorCode.INTERNAL, "error": "internal error"})
        finally:
            close_old_connections()
        channel.put((_FINAL, final))

    # The request's thread holds no connection while the stream lasts: the worker takes its own
    # for each transaction (a live stream needs none while the model works).
    stores.release_connections()
    # The run goes on now, whether or not the client ever reads the body: a started run always
    # finishes and is recorded (a client that leaves early loses only the frames).
    threading.Thread(target=execute, name="agents-stream", daemon=True).start()
    return stream_response(_frames(channel=channel, frame=frame, start=start))


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
