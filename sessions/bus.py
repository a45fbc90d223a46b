"""The process's session bus and the frames the stream carries (spec 003: …/sessions/stream).

`get_bus()` returns this process's bus, built from settings: `AGENTS_SESSION_BUS` = `channels`
(default: the Channels layer of `CHANNEL_LAYERS` — in-memory, or channels-redis when
`REDIS_URL` is set) or `local` (in-process only). `AGENTS_SSE_BUFFER_FRAMES` (256) is each
subscriber's buffer. A forked child builds its own bus.

A frame is a dict:
`{"kind": "event"|"session"|"delta", "org": <slug>, "root": <root session id>, "position": <int|None>,
"data": {"event": <eventView>} | {"session": <sessionView>} | {"sessionId", "runId", "text"}}` —
`position` (event frames only) is the event's org-wide position, the `id:` of its SSE frame. A
delta frame is ephemeral: a piece of a reply being written, never stored, never replayed. A
batch append publishes one frame `{"kind": "events", …, "frames": [<event frame>, …]}`
(`batch_frame`).
"""

from __future__ import annotations

import logging
import os
import threading

from django.conf import settings
from django.core.signals import setting_changed

from agents_site.vocabulary import StreamFrameKind
from sessions.backends.base import Bus
from sessions.backends.local import LocalBus
from sessions.backends.layer import ChannelLayerBus

logger = logging.getLogger(__name__)
_lock = threading.Lock()
_bus: Bus | None = None
_bus_pid: int | None = None
_BUS_SETTINGS = {"AGENTS_SESSION_BUS", "AGENTS_SSE_BUFFER_FRAMES", "CHANNEL_LAYERS"}


def _build() -> Bus:
    kind = getattr(settings, "AGENTS_SESSION_BUS", "channels")
    capacity = int(getattr(settings, "AGENTS_SSE_BUFFER_FRAMES", 256))
    if kind == "local":
        return LocalBus(capacity=capacity)
    if kind == "channels":
        return ChannelLayerBus(capacity=capacity)
    raise ValueError(f"AGENTS_SESSION_BUS must be 'channels' or 'local', not {kind!r}")


def get_bus() -> Bus:
    """Return this process's session bus, building it on first use (thread-safe)."""
    global _bus, _bus_pid
    bus = _bus
    if bus is not None and _bus_pid == os.getpid():
        return bus
    with _lock:
        if _bus is None or _bus_pid != os.getpid():
            _bus = _build()
            _bus_pid = os.getpid()
        return _bus


def flush_before_exit(timeout: float = 2.0) -> bool:
    """Wait up to `timeout` seconds for the frames this process published to leave it; for a caller
    about to leave with `os._exit`, which runs no exit hook (a normal exit flushes by itself).

    Returns `Bus.flush`'s answer; False (never builds a bus) when this process has none.
    """
    bus = _bus
    if bus is None or _bus_pid != os.getpid():
        return False
    return bus.flush(timeout)


def reset_bus() -> None:
    """Close this process's bus; the next `get_bus()` builds a new one from settings."""
    global _bus, _bus_pid
    with _lock:
        bus, _bus, _bus_pid = _bus, None, None
    if bus is not None:
        bus.close()


def _on_setting_changed(setting, **kwargs) -> None:
    if setting in _BUS_SETTINGS:
        reset_bus()


setting_changed.connect(_on_setting_changed)


def event_frame(*, org: str, root: str, position: int, event_view: dict) -> dict:
    """Return the bus frame of one appended event (see module doc)."""
    return {"kind": str(StreamFrameKind.EVENT), "org": org, "root": root, "position": position, "data": {"event": event_view}}


def batch_frame(*, org: str, frames: list[dict]) -> dict:
    """Return one bus frame carrying the event frames of a batch append, in order.

    `{"kind": "events", "org", "root", "position": <last position>, "frames": [<event frame>, …]}`:
    a subscriber buffers it as one frame (a 500-event batch never overflows its buffer); the
    stream sends each carried frame as its own `event` frame.
    """
    return {"kind": str(StreamFrameKind.EVENTS), "org": org, "root": frames[-1]["root"], "position": frames[-1]["position"], "frames": frames}


def session_frame(*, org: str, session_view: dict) -> dict:
    """Return the bus frame of a registered or updated session (see module doc)."""
    return {
        "kind": str(StreamFrameKind.SESSION),
        "org": org,
        "root": session_view["rootSessionId"],
        "position": None,
        "data": {"session": session_view},
    }


def delta_frame(*, org: str, root: str, session_id: str, run_id: str, text: str) -> dict:
    """Return the bus frame of one piece of a reply being written (see module doc)."""
    return {"kind": str(StreamFrameKind.DELTA), "org": org, "root": root, "position": None,
            "data": {"sessionId": session_id, "runId": run_id, "text": text}}


def publish(org: str, frame: dict) -> None:
    """Publish `frame` on org `org`'s stream; never blocks, never raises into the writer."""
    try:
        get_bus().publish(org, frame)
    except Exception:  # a live-feed failure must never fail a write that already committed
        logger.warning("session bus publish failed for %s", org, exc_info=True)
