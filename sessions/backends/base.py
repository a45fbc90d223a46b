"""The session bus: fan-out of stream frames per org, and point-to-point mailboxes.

Two jobs, one interface, two backends (chosen by `AGENTS_SESSION_BUS`, sessions.bus):

* Fan-out. `publish(org, frame)` hands a frame to every subscriber of that org — in this
  process and, with a shared channel layer (Redis), in every other. It never blocks and never
  waits for a subscriber: each subscriber owns a bounded buffer (`capacity` frames, 256 by
  default) on its own event loop, and one that falls `capacity` frames behind is DROPPED
  (unsubscribed; its reader drains what it holds, then `SubscriberDropped`). The org filter
  is applied before fan-out: a subscriber is registered under one org and is only ever offered
  that org's frames.
* Mailboxes. `mailbox_open()` makes a named channel its owner reads with
  `receive(timeout)`; `send(name, message)` delivers to a mailbox by name, from any thread
  (and, with Redis, any process). Steering commands travel this way (sessions.control).

Every method is safe to call from any thread. `subscribe` is a coroutine and binds the
subscription to the running event loop; `publish`, `send` and mailboxes are synchronous.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections import defaultdict, deque
from collections.abc import Callable


class BusError(Exception):
    """A message could not be delivered (no such mailbox, layer full or unreachable)."""


class SubscriberDropped(Exception):
    """The subscription fell `capacity` frames behind (or was closed) and was dropped."""


class Subscription:
    """One subscriber's bounded frame buffer, bound to the event loop that created it.

    Frames are offered from any thread (`Fanout.deliver`) and read with `await get(timeout)`.
    """

    def __init__(self, *, org: str, capacity: int, on_close: Callable[[Subscription], None]) -> None:
        self.org = org
        self.capacity = capacity
        self.loop = asyncio.get_running_loop()
        self.dropped = False
        self.closed = False
        self._frames: deque[dict] = deque()
        self._waiter: asyncio.Future | None = None  # the reader waiting in `get`, if any
        self._on_close = on_close

    def offer(self, frame: dict) -> None:
        """Buffer `frame`, or drop this subscription if it already holds `capacity` frames.

        Runs on the subscription's loop (the fan-out schedules it there).
        """
        if self.closed or self.dropped:
            return
        if len(self._frames) >= self.capacity:
            self.dropped = True
            self._on_close(self)
        else:
            self._frames.append(frame)
        self._wake()

    def _wake(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @property
    def backlog(self) -> int:
        """Return the number of frames buffered and not yet read."""
        return len(self._frames)

    @property
    def waiting(self) -> bool:
        """Return True while a reader is parked in `get` (nothing buffered; it waits for a frame)."""
        return self._waiter is not None and not self._waiter.done()

    async def get(self, timeout: float | None) -> dict | None:
        """Return the next frame, or None after `timeout` seconds without one.

        Raises `SubscriberDropped` once the subscription was dropped (or closed) and its
        buffered frames are drained.
        """
        while True:
            if self._frames:
                return self._frames.popleft()
            if self.dropped or self.closed:
                raise SubscriberDropped(self.org)
            # A bare future and a timer: no task per wait (`asyncio.wait_for` makes one), which
            # mattered at 100 streams × 200 frames/s (BENCHMARKS.md, issue 16).
            waiter = self._waiter = self.loop.create_future()
            timer = self.loop.call_later(timeout, self._wake) if timeout is not None else None
            try:
                await waiter
            finally:
                if timer is not None:
                    timer.cancel()
                if self._waiter is waiter:
                    self._waiter = None
            if not self._frames and not (self.dropped or self.closed):
                return None  # the timeout woke it

    def drain(self, limit: int) -> list[dict]:
        """Return (and remove) up to `limit` frames already buffered, oldest first; never waits."""
        frames = []
        while self._frames and len(frames) < limit:
            frames.append(self._frames.popleft())
        return frames

    def close(self) -> None:
        """Unsubscribe (idempotent). Call it when the reader goes away."""
        if not self.closed:
            self.closed = True
            self._on_close(self)


def _offer_all(subscriptions: list[Subscription], frame: dict) -> None:
    for subscription in subscriptions:
        subscription.offer(frame)


class Fanout:
    """The in-process registry of subscriptions per org; delivery is thread-safe, O(1) per loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: dict[str, set[Subscription]] = defaultdict(set)

    def add(self, subscription: Subscription) -> None:
        """Register `subscription` under its org."""
        with self._lock:
            self._subscriptions[subscription.org].add(subscription)

    def remove(self, subscription: Subscription) -> int:
        """Unregister `subscription`; return how many subscriptions its org still has here."""
        with self._lock:
            subs = self._subscriptions.get(subscription.org)
            if subs is None:
                return 0
            subs.discard(subscription)
            if not subs:
                del self._subscriptions[subscription.org]
                return 0
            return len(subs)

    def count(self, org: str) -> int:
        """Return the number of subscriptions of `org` in this process."""
        with self._lock:
            return len(self._subscriptions.get(org, ()))

    def subscriptions(self, org: str) -> list[Subscription]:
        """Return the live subscriptions of `org` in this process (a snapshot, in no order)."""
        with self._lock:
            return list(self._subscriptions.get(org, ()))

    def deliver(self, org: str, frame: dict) -> None:
        """Offer `frame` to every subscription of `org`, each on its own loop; never blocks."""
        with self._lock:
            subscriptions = list(self._subscriptions.get(org, ()))
        by_loop: dict[asyncio.AbstractEventLoop, list[Subscription]] = defaultdict(list)
        for subscription in subscriptions:
            by_loop[subscription.loop].append(subscription)
        for loop, group in by_loop.items():
            try:
                loop.call_soon_threadsafe(_offer_all, group, frame)
            except RuntimeError:  # the subscriber's loop is closed: it is gone
                for subscription in group:
                    self.remove(subscription)


class Mailbox(ABC):
    """A named channel one owner reads; anyone holding the name can `Bus.send` to it."""

    name: str

    @abstractmethod
    def receive(self, timeout: float) -> dict | None:
        """Return the next message, or None after `timeout` seconds (blocking, sync)."""

    @abstractmethod
    def close(self) -> None:
        """Stop receiving; later sends to this name fail or expire (idempotent)."""

    def __enter__(self) -> Mailbox:
        return self

    def __exit__(self, *exc) -> None:
        with contextlib.suppress(Exception):
            self.close()


class Bus(ABC):
    """The session bus interface (see module doc). `capacity` is the per-subscriber buffer.

    `process_local` is True when messages cannot leave this process (the in-memory layer, the
    local backend): a mailbox name is then meaningful only inside the process that opened it.
    """

    process_local: bool = True

    def __init__(self, *, capacity: int = 256) -> None:
        self.capacity = capacity
        self.fanout = Fanout()

    @abstractmethod
    def publish(self, org: str, frame: dict) -> None:
        """Offer `frame` (a JSON-able dict) to every subscriber of `org`; never blocks."""

    @abstractmethod
    async def subscribe(self, org: str) -> Subscription:
        """Return a subscription to `org`'s frames; frames published after it returns reach it."""

    def subscriber_count(self, org: str) -> int:
        """Return the number of live subscriptions of `org` in this process."""
        return self.fanout.count(org)

    @abstractmethod
    def mailbox_open(self) -> Mailbox:
        """Create a mailbox with a fresh channel name."""

    @abstractmethod
    def send(self, name: str, message: dict, *, timeout: float = 5.0) -> None:
        """Deliver `message` to mailbox `name`; raise `BusError` when it cannot be delivered."""

    def flush(self, timeout: float = 2.0) -> bool:
        """Wait up to `timeout` seconds for every frame published so far to leave this process.

        Returns True once nothing published is still waiting to be sent (at once for a backend
        that delivers as it publishes), False if `timeout` passed first. Never raises.
        """
        return True

    def close(self) -> None:
        """Release the backend's resources (threads, connections). The bus is unusable after."""
