"""The live session stream as Server-Sent Events (spec 003: GET /v1/agents/sessions/stream).

An async generator (a sync one never streams under ASGI) over the org's bus subscription,
with the store as the source of truth behind it:

* Frames: `event: session` + `data: {"session": <sessionView>}`, and `event: event` +
  `id: <position>` + `data: {"event": <eventView>}`. `position` is the event's org-wide,
  gap-free number, given in the order events become visible (`sessions.clock`: a late commit
  gets a later position, so nothing ever fills in behind a reader). While a run's reply is being
  written, `event: delta` + `data: {"sessionId", "runId", "text"}` carries each piece (masked)
  live: no `id:`, never stored, never replayed on resume; the stored `message` event that
  follows holds the whole reply.
* Resume: a client reconnecting with `Last-Event-ID: k` (header, or `?lastEventId=k`) is
  first replayed every event with position > k from the store (page by page), then the live
  feed. For every k the client gets exactly the events after k: no gap, no duplicate, for the
  whole life of the log. Without it the stream starts at the head of the log.
* Resume is never silent: a `Last-Event-ID` beyond the log's head (a made-up id) or inside a
  gap a restore left (`sessions.models.PositionGap`: positions the replaced store handed out
  after the restored moment) opens the stream with `event: reset`, `id: <head>`,
  `data: {"head": <head>}` and the stream goes on live from the head. A stream open while its
  org is restored gets the same frame at its next store read. The client re-reads what it
  shows with the GET routes (as after any drop); its next reconnect sends the head.
* Order and gaps: the stream keeps the org position it has covered. A live frame at or below
  it is a duplicate and skipped; one above the next expected position (frames from several
  processes can arrive out of order, and the layer may lose one) first pulls the missing
  positions from the store. Every `AGENTS_SSE_CATCHUP_SECONDS` (5) without frames it also
  reads the store, so an event appended by a process the bus does not reach still arrives.
* Tenancy: the org comes from the principal, captured before the body streams (the request's
  org context is gone by then; every store read runs in `tenancy.stores.org_context`). The
  bus subscription is the org's own; `?root=` narrows to the flow of that session.
* Writes: every live frame already waiting goes out with the one just read, in one write; and a
  stream that wrote less than `AGENTS_SSE_LINGER_MS` (20) ago first lingers until that much has
  passed, so a busy stream writes at most ~50 times a second (frames gathered, none delayed more
  than the linger) while a quiet one writes each frame at once. At 100 subscribers × 200 events/s
  that is 5,000 writes a second instead of 20,000: the daphne process's CPU, not the frames,
  bounded the fan-out tail (BENCHMARKS.md, issue 26).
* `: ping` every `AGENTS_SSE_PING_SECONDS` (25). A subscriber `AGENTS_SSE_BUFFER_FRAMES`
  (256) frames behind is dropped by the bus; the stream then ends after what it holds.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http import StreamingHttpResponse

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import StreamFrameKind
from sessions import selectors
from sessions.backends.base import SubscriberDropped
from sessions.bus import get_bus
from sessions.presenters import event_view
from tenancy import stores

REPLAY_PAGE = 500
COALESCE_FRAMES = 64  # live frames already waiting that are sent with the one just read, in one write
MAX_POSITION_DIGITS = 19  # positions are 64-bit integers; a longer id is past any head


def parse_last_event_id(header: str | None, query: str | None) -> int | None:
    """Return the resume position from the `Last-Event-ID` header or `?lastEventId=` (header wins).

    Blank → None (start at the head). Raises 400 for anything but ASCII digits (`²` and `٣`
    are digits to Python, not ids). An id of more than 19 digits is past any head and comes
    back as 10**19 (the stream then resumes from the head).
    """
    raw = (header if header not in (None, "") else query) or ""
    raw = raw.strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise InvalidRequest("Last-Event-ID must be a non-negative integer (the id: of an event frame)")
    return int(raw) if len(raw) <= MAX_POSITION_DIGITS else 10**MAX_POSITION_DIGITS


def render(kind: str, data: dict, event_id: int | None = None) -> str:
    """Return one SSE frame: `event:`, optional `id:`, one `data:` line of compact JSON."""
    head = f"event: {kind}\n" + (f"id: {event_id}\n" if event_id is not None else "")
    return head + "data: " + json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n\n"


async def read_store(org: str, fn: Callable, **kwargs):
    """Run store read `fn(**kwargs)` for org `org` in a worker thread; close its connections after."""

    def run():
        try:
            with stores.org_context(org):
                return fn(**kwargs)
        finally:
            close_old_connections()

    return await sync_to_async(run, thread_sensitive=False)()


def _rendered(frame: dict) -> str:
    """Return the SSE text of a live event frame, rendered once per process and shared.

    Every subscriber of this process is handed the same frame object by the bus.
    """
    text = frame.get("_sse")
    if text is None:
        text = frame["_sse"] = render(StreamFrameKind.EVENT, frame["data"], int(frame["position"]))
    return text


def _unbatched(frame: dict) -> list[dict] | tuple[dict]:
    """Return the frames a bus frame carries: a batch's event frames in order, else the frame itself."""
    if frame.get("kind") == StreamFrameKind.EVENTS:
        return frame["frames"]
    return (frame,)


def _replay_page(*, position: int, root: str | None) -> tuple[list[str], int, bool]:
    if selectors.position_void(position):
        # The store was restored under this stream: what it sent past the restored moment is gone.
        head = selectors.stream_head()
        return [render(StreamFrameKind.RESET, {"head": head}, head)], head, True
    events, horizon = selectors.events_after(position=position, root=root, limit=REPLAY_PAGE)
    chunks = [render(StreamFrameKind.EVENT, {"event": event_view(e)}, e.position) for e in events]
    return chunks, horizon, len(events) == REPLAY_PAGE


def resolve_root(*, session_id: str) -> str:
    """Return the flow (`root_id`) of session `session_id`; 404 when it is not in the org."""
    return selectors.session_get(session_id=session_id).root_id


async def session_stream(*, org: str, root: str | None, last_event_id: int | None) -> AsyncIterator[str]:
    """Yield the SSE text of org `org`'s stream (see module doc); ends when the bus drops it.

    The subscription is taken before the first byte, so `: stream open` means "live from
    here": nothing committed after it can be missed. The replay (Last-Event-ID) then runs from
    the store page by page while live frames wait in the subscription's buffer; a replay so
    long that 256 live frames pile up drops the stream, and the client's next reconnect resumes
    from the last id it got.
    """
    ping_seconds = float(getattr(settings, "AGENTS_SSE_PING_SECONDS", 25))
    linger = max(0.0, float(getattr(settings, "AGENTS_SSE_LINGER_MS", 20))) / 1000
    catchup_seconds = float(getattr(settings, "AGENTS_SSE_CATCHUP_SECONDS", 5))
    loop = asyncio.get_running_loop()
    subscription = await get_bus().subscribe(org)
    state = {"cursor": 0}

    async def from_store() -> AsyncIterator[str]:
        more = True
        while more:
            chunks, state["cursor"], more = await read_store(org, _replay_page, position=state["cursor"], root=root)
            if chunks:
                yield "".join(chunks)  # a page of the store, one write

    try:
        # The head is read before the first byte: everything committed after it arrives through
        # the subscription taken above, so `: stream open` means "live from here".
        head, reset = await read_store(org, selectors.resume_point, last_event_id=last_event_id)
        yield ": stream open\n\n"
        if reset:
            # A made-up id, or one the store handed out before it was restored to an earlier
            # moment (beyond the head, or in the gap the restore left): say so, never resume silently.
            yield render(StreamFrameKind.RESET, {"head": head}, head)
            last_event_id = head
        state["cursor"] = head if last_event_id is None else last_event_id
        async for chunk in from_store():
            yield chunk
        next_ping = loop.time() + ping_seconds
        next_catchup = loop.time() + catchup_seconds
        last_write = float("-inf")
        while True:
            # The ping is checked every turn, not only when the feed is idle: frames of other
            # flows, filtered out by `?root=`, must not starve it (it is also how a departed
            # client is noticed).
            if loop.time() >= next_ping:
                yield ": ping\n\n"
                next_ping = loop.time() + ping_seconds
            timeout = max(0.0, min(next_ping, next_catchup) - loop.time())
            try:
                frame = await subscription.get(timeout)
            except SubscriberDropped:
                return
            if frame is None:
                now = loop.time()
                if now >= next_catchup:
                    async for chunk in from_store():
                        yield chunk
                    next_catchup = now + catchup_seconds
                continue
            pause = last_write + linger - loop.time()
            if pause > 0:  # wrote a moment ago: gather what arrives until the linger has passed (a rate bound, not a wait for anything)
                await asyncio.sleep(pause)
            # Every frame already waiting is sent with this one, as one write: under load a
            # stream catches up in a few large writes instead of one per frame.
            out: list[str] = []
            for live in (piece for waiting in (frame, *subscription.drain(COALESCE_FRAMES)) for piece in _unbatched(waiting)):
                if live.get("org") != org:  # never: the bus is per org; kept as the fail-closed proof
                    continue
                if live["kind"] in (StreamFrameKind.SESSION, StreamFrameKind.DELTA):
                    if root is None or live["root"] == root:
                        out.append(render(live["kind"], live["data"]))
                    continue
                position = int(live["position"])
                if position > state["cursor"] + 1:  # frames of other processes came first, or one was lost
                    if out:
                        yield "".join(out)
                        out = []
                    async for chunk in from_store():
                        yield chunk
                if position <= state["cursor"]:
                    continue
                state["cursor"] = position
                if root is None or live["root"] == root:
                    out.append(_rendered(live))
                next_catchup = loop.time() + catchup_seconds
            if out:
                last_write = loop.time()
                yield "".join(out)
    finally:
        subscription.close()


def stream_response(*, org: str, root: str | None, last_event_id: int | None) -> StreamingHttpResponse:
    """Return the streaming response: text/event-stream, not cached, not buffered, not gzipped."""
    response = StreamingHttpResponse(session_stream(org=org, root=root, last_event_id=last_event_id), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
