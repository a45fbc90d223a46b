"""The in-process bus: fan-out and mailboxes inside one process, no event loop of its own.

For deployments of one process and for tests. Frames reach subscribers of this process only;
a mailbox is a thread-safe queue, so a send to a name no live mailbox holds fails at once.
"""

from __future__ import annotations

import os
import queue
import threading
import uuid

from sessions.backends.base import Bus, BusError, Mailbox, Subscription


class LocalMailbox(Mailbox):
    """A mailbox backed by a `queue.Queue` registered in its `LocalBus`."""

    def __init__(self, bus: LocalBus, name: str) -> None:
        self.name = name
        self._bus = bus
        self.queue: queue.Queue[dict] = queue.Queue()

    def receive(self, timeout: float) -> dict | None:
        """Return the next message, or None after `timeout` seconds."""
        try:
            return self.queue.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None

    def close(self) -> None:
        """Unregister the name; later sends to it raise `BusError`."""
        self._bus._forget(self.name)


class LocalBus(Bus):
    """The in-process backend (`AGENTS_SESSION_BUS=local`)."""

    def __init__(self, *, capacity: int = 256) -> None:
        super().__init__(capacity=capacity)
        self._lock = threading.Lock()
        self._mailboxes: dict[str, LocalMailbox] = {}

    def publish(self, org: str, frame: dict) -> None:
        """Offer `frame` to this process's subscribers of `org`."""
        self.fanout.deliver(org, frame)

    async def subscribe(self, org: str) -> Subscription:
        """Return a subscription to `org`, bound to the running loop."""
        subscription = Subscription(org=org, capacity=self.capacity, on_close=self.fanout.remove)
        self.fanout.add(subscription)
        return subscription

    def mailbox_open(self) -> LocalMailbox:
        """Create a mailbox named `agents.local.<pid>!<hex>`."""
        mailbox = LocalMailbox(self, f"agents.local.{os.getpid()}!{uuid.uuid4().hex}")
        with self._lock:
            self._mailboxes[mailbox.name] = mailbox
        return mailbox

    def _forget(self, name: str) -> None:
        with self._lock:
            self._mailboxes.pop(name, None)

    def send(self, name: str, message: dict, *, timeout: float = 5.0) -> None:
        """Put `message` in mailbox `name`; `BusError` when no live mailbox has that name."""
        with self._lock:
            mailbox = self._mailboxes.get(name)
        if mailbox is None:
            raise BusError(f"no live receiver on channel {name}")
        mailbox.queue.put(message)
