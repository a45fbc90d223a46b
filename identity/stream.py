"""The inbox stream: a user's inbox items as Server-Sent Events (GET /v1/identity/inbox/stream).

Like the session stream (`sessions.stream`): an async view returning an async generator (a sync
one never streams under ASGI). The store is the source of truth; the Channels layer only wakes
the stream (`identity.live.inbox_group`), and the stream also re-reads the store every
`AGENTS_SSE_CATCHUP_SECONDS` (5), so an item written by a process the layer does not reach
still arrives.

* Frames: `event: inbox` + `id: <item id>` + `data: <inbox item view>`; `: ping` every
  `AGENTS_SSE_PING_SECONDS` (25).
* Resume: `Last-Event-ID: k` (or `?lastEventId=k`) replays every item with id > k, oldest
  first, then the live feed — no gap, no duplicate. Without it the stream starts at the head.
* The principal (user and org) is captured before the body streams; store reads run in
  `tenancy.stores.org_context`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

from channels.layers import get_channel_layer
from django.conf import settings
from django.http import JsonResponse, StreamingHttpResponse

from django.views.decorators.http import require_GET

from agents_site.errors import ApiError
from agents_site.vocabulary import InboxStreamFrame
from identity import live, selectors
from identity.presenters import inbox_item_view
from sessions.stream import parse_last_event_id, read_store
from tenancy.authenticate import org_principal

FRAME_KIND = InboxStreamFrame.INBOX


def _page(*, user_id: str, after_id: int) -> list[tuple[int, dict]]:
    return [(item.id, inbox_item_view(item)) for item in selectors.inbox_after(user_id=user_id, after_id=after_id)]


def _frame(item_id: int, view: dict) -> str:
    return f"event: {FRAME_KIND}\nid: {item_id}\ndata: " + json.dumps(view, ensure_ascii=False, separators=(",", ":")) + "\n\n"


async def inbox_stream(*, org: str, user_id: str, last_event_id: int | None) -> AsyncIterator[str]:
    """Yield the SSE text of `user_id`'s inbox in org `org` (see module doc); runs until the client leaves."""
    ping_seconds = float(getattr(settings, "AGENTS_SSE_PING_SECONDS", 25))
    catchup_seconds = float(getattr(settings, "AGENTS_SSE_CATCHUP_SECONDS", 5))
    layer = get_channel_layer()
    group = live.inbox_group(org, user_id)
    channel = await layer.new_channel() if layer is not None else None
    if channel is not None:
        await layer.group_add(group, channel)
    loop = asyncio.get_running_loop()
    try:
        yield ": stream open\n\n"
        head = await read_store(org, selectors.inbox_head, user_id=user_id)
        cursor = head if last_event_id is None else min(last_event_id, head)
        next_ping = loop.time() + ping_seconds
        while True:
            while True:
                rows = await read_store(org, _page, user_id=user_id, after_id=cursor)
                for item_id, view in rows:
                    cursor = item_id
                    yield _frame(item_id, view)
                if len(rows) < 500:
                    break
            if loop.time() >= next_ping:
                yield ": ping\n\n"
                next_ping = loop.time() + ping_seconds
            timeout = max(0.05, min(catchup_seconds, next_ping - loop.time()))
            if channel is None:
                await asyncio.sleep(timeout)
                continue
            try:
                await asyncio.wait_for(layer.receive(channel), timeout)
            except asyncio.TimeoutError:
                pass
    finally:
        if channel is not None:
            try:
                await layer.group_discard(group, channel)
            except Exception:  # the layer may be gone at shutdown
                pass


@require_GET
async def inbox_stream_view(request):
    """GET /v1/identity/inbox/stream: the caller's inbox as SSE (user principal); errors in the one shape."""
    try:
        principal = org_principal(request)
        last = parse_last_event_id(request.headers.get("Last-Event-ID"), request.GET.get("lastEventId"))
    except ApiError as exc:
        return JsonResponse(exc.body(), status=exc.status)
    response = StreamingHttpResponse(
        inbox_stream(org=principal.org_slug, user_id=principal.subject, last_event_id=last), content_type="text/event-stream"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response
