"""The Channels-layer bus: fan-out and mailboxes over `CHANNEL_LAYERS` (in-memory or Redis).

Every layer operation of the process runs on ONE private event loop in a daemon thread (the
"bus loop"), on a layer instance of its own (`channel_layers.make_backend`). That is what makes
the in-memory layer — whose asyncio queues belong to the loop that first used them — carry
frames and commands between threads, and it keeps channels-redis from ever receiving on two
loops at once. With `channels-redis`, frames and commands cross processes.

Fan-out is two-level: per (process, org) one relay channel joins the org's group
`agents.sessions.<org>` and hands what it receives to this process's subscribers of that org
(sessions.backends.base.Fanout). So a frame costs one layer message per process, not per
subscriber, and a stuck subscriber only ever fills its own buffer.

`publish` puts the frame on an in-process outbox that one sender task drains in order; it
never waits for the layer. A frame the layer cannot take is logged and lost to the live feed
only — the store stays the source of truth and the stream catches up from it. A process that
exits flushes its outbox first (`flush`, once, ≤ `EXIT_FLUSH_SECONDS`): the last frames a writer
published reach the streams live, not at their next store catch-up 5 s later. One threading exit
hook per process does it, run before `concurrent.futures` stops taking work (channels-redis
resolves a host name through the loop's executor) — at the interpreter's exit and at the end
of a multiprocessing child (django-q2's workers, which then leave through `os._exit`); a caller
that leaves with `os._exit` itself calls `flush` first, as `runs.shutdown` does.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import concurrent.futures.thread  # noqa: F401  (its exit hook registered first, so ours runs before it)
import contextlib
import logging
import os
import threading
import time
import weakref
from dataclasses import dataclass, field

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers

from sessions.backends.base import Bus, BusError, Mailbox, Subscription

logger = logging.getLogger(__name__)

CHANNEL_PREFIX = "agents"  # one prefix: channels-redis serves all of an instance's channels from one list
OUTBOX_LIMIT = 10_000  # frames waiting for the layer before publish starts dropping (logged)
JOIN_TIMEOUT_SECONDS = 5.0
RETRY_SECONDS = 1.0
EXIT_FLUSH_SECONDS = 2.0  # how long an exiting process waits for its outbox with no frame going out
EXIT_FLUSH_MAX_SECONDS = 30.0  # the longest an exiting process waits while frames still go out


def group_name(org: str) -> str:
    """Return the layer group of org `org`'s stream: `agents.sessions.<org>`."""
    return f"agents.sessions.{org}"


_live_buses: weakref.WeakSet = weakref.WeakSet()  # this process's open buses, flushed once at exit
_exit_hook_lock = threading.Lock()
_exit_hook_pid: int | None = None  # the process that registered the hook (a forked child registers its own)


def _flush_live_buses() -> None:
    """Flush every open bus of this process once (the exit hook)."""
    for bus in list(_live_buses):
        bus._flush_at_exit()


def _register_exit_flush(bus: ChannelLayerBus) -> None:
    """Flush `bus` when the interpreter exits, before `concurrent.futures` stops taking work.

    One hook per process flushes every open bus (a `WeakSet`: a closed or collected bus is
    gone from it). `threading._register_atexit` (CPython ≥ 3.9, what `concurrent.futures`
    itself uses) runs its hooks in reverse order before threads are joined — on a normal exit
    and at the end of a multiprocessing child (django-q2's workers), whose `os._exit` then runs
    no `atexit` hook; plain `atexit` runs after the executors stop, when channels-redis cannot
    resolve a host name any more. Falls back to `atexit` where the hook is missing or the exit
    has begun.
    """
    global _exit_hook_pid
    _live_buses.add(bus)
    with _exit_hook_lock:
        if _exit_hook_pid == os.getpid():
            return
        _exit_hook_pid = os.getpid()
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(_flush_live_buses)
            return
    except RuntimeError:  # the interpreter is shutting down already
        pass
    atexit.register(_flush_live_buses)


class _LoopThread:
    """A daemon thread running one event loop forever."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()
        # Stopped: end what is still pending here, on its own loop, before `stop` closes it. A task
        # left pending (the sender, when the bus's shutdown did not finish in time beside a CPU
        # hog) was collected later and cancelled itself on the closed loop: "Event loop is closed"
        # and "Task was destroyed but it is pending" at the end of the PostgreSQL pass.
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            with contextlib.suppress(Exception):
                self.loop.run_until_complete(asyncio.wait(pending, timeout=5))
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())

    def submit(self, coro) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn, *args) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def on_loop(self) -> bool:
        return threading.current_thread() is self.thread

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=15)  # its pending tasks end first (at most 5 s)
        if not self.thread.is_alive():
            with contextlib.suppress(Exception):
                self.loop.close()  # channels-redis closes its pools of this loop here


@dataclass
class _Relay:
    members: set = field(default_factory=set)
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task | None = None


class LayerMailbox(Mailbox):
    """A mailbox on a layer channel; a pump task on the bus loop fills a thread-safe queue."""

    def __init__(self, bus: ChannelLayerBus, name: str) -> None:
        import queue

        self.name = name
        self._bus = bus
        self.queue: queue.Queue[dict] = queue.Queue()
        self._pump: concurrent.futures.Future | None = None

    def receive(self, timeout: float) -> dict | None:
        """Return the next message, or None after `timeout` seconds."""
        import queue

        try:
            return self.queue.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None

    def close(self) -> None:
        """Stop the pump; messages sent to the name later expire in the layer."""
        if self._pump is not None:
            self._pump.cancel()
            self._pump = None


class ChannelLayerBus(Bus):
    """The Channels-layer backend (`AGENTS_SESSION_BUS=channels`, the default)."""

    def __init__(self, *, capacity: int = 256, alias: str = DEFAULT_CHANNEL_LAYER, group_refresh_seconds: float = 3600.0) -> None:
        super().__init__(capacity=capacity)
        self.alias = alias
        self.group_refresh_seconds = group_refresh_seconds
        self._relays: dict[str, _Relay] = {}
        self._runner = _LoopThread("agents-session-bus")
        self.sent = 0  # frames the layer took (`group_send` returned)
        self.failed = 0  # frames the layer refused or that could not be sent (logged)
        self.relay_failures = 0  # receives of an org's relay that failed and were retried (logged)
        self._closed = False
        self._exit_flushed = False
        self._runner.submit(self._start()).result(timeout=10)
        self._pid = os.getpid()
        _register_exit_flush(self)

    async def _start(self) -> None:
        from channels.layers import InMemoryChannelLayer

        self.layer = channel_layers.make_backend(self.alias)
        self.process_local = isinstance(self.layer, InMemoryChannelLayer)
        self._outbox: asyncio.Queue = asyncio.Queue()
        self._sender_task = asyncio.create_task(self._sender())

    # --- publishing --------------------------------------------------------------------

    def publish(self, org: str, frame: dict) -> None:
        """Queue `frame` for the org's group; returns at once (see module doc)."""
        self._runner.call(self._enqueue, group_name(org), {"type": "agents.frame", "frame": frame})

    def _enqueue(self, group: str, message: dict) -> None:
        if self._outbox.qsize() >= OUTBOX_LIMIT:
            logger.warning("session bus outbox full; a frame for %s was not sent live", group)
            return
        self._outbox.put_nowait((group, message))

    async def _sender(self) -> None:
        while True:
            group, message = await self._outbox.get()
            try:
                await self.layer.group_send(group, message)
                self.sent += 1
            except Exception:
                self.failed += 1
                logger.warning("session bus: group_send to %s failed", group, exc_info=True)
            finally:
                self._outbox.task_done()

    def flush(self, timeout: float = 2.0) -> bool:
        """Wait up to `timeout` s until the outbox is empty and its last frame sent; see `Bus.flush`.

        False also when a frame the wait covered could not be sent (the layer refused it).
        """
        if self._closed or self._runner.on_loop() or not self._runner.loop.is_running():
            return False
        failed = self.failed
        future = self._runner.submit(self._outbox.join())
        try:
            future.result(timeout=timeout)
        except Exception:  # timed out (the layer is slow or gone), or the loop stopped
            future.cancel()
            return False
        return self.failed == failed

    def _flush_at_exit(self) -> None:
        if os.getpid() != self._pid or self._closed or self._exit_flushed:  # a forked child's copy owns no loop thread
            return
        self._exit_flushed = True  # once per bus
        # Wait while frames still go out (a loaded host sends 200 frames in more than 2 s: the
        # wait used to end there and the rest were lost), but give up after EXIT_FLUSH_SECONDS
        # in which none went out (the layer is gone) or EXIT_FLUSH_MAX_SECONDS in all.
        failed, sent, deadline = self.failed, self.sent, time.monotonic() + EXIT_FLUSH_MAX_SECONDS
        flushed = self.flush(EXIT_FLUSH_SECONDS)
        while not flushed and self.sent != sent and time.monotonic() < deadline:
            sent = self.sent
            flushed = self.flush(EXIT_FLUSH_SECONDS)
        if not flushed or self.failed != failed:
            logger.warning("session bus: frames published before exit were not all sent live")

    # --- subscribing -------------------------------------------------------------------

    async def subscribe(self, org: str) -> Subscription:
        """Return a subscription to `org`; returns once this process's relay joined the group.

        If the layer cannot be joined within 5 s the subscription is still returned (and the
        relay keeps retrying); the stream then lives on its store catch-up until it joins.
        """
        subscription = Subscription(org=org, capacity=self.capacity, on_close=self._unsubscribe)
        self.fanout.add(subscription)
        try:
            joined = await asyncio.wrap_future(self._runner.submit(self._acquire(org, id(subscription))))
        except BaseException:
            subscription.close()
            raise
        if not joined:
            logger.warning("session bus: relay for %s has not joined its group yet", org)
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        self.fanout.remove(subscription)
        with contextlib.suppress(RuntimeError):  # the bus loop is gone (bus closed)
            self._runner.call(self._release, subscription.org, id(subscription))

    async def _acquire(self, org: str, key: int) -> bool:
        relay = self._relays.get(org)
        if relay is None or relay.task is None or relay.task.done():
            relay = _Relay()
            relay.task = asyncio.create_task(self._relay(org, relay))
            self._relays[org] = relay
        relay.members.add(key)
        try:
            await asyncio.wait_for(relay.ready.wait(), JOIN_TIMEOUT_SECONDS)
        except TimeoutError:
            return False
        return True

    def _release(self, org: str, key: int) -> None:
        relay = self._relays.get(org)
        if relay is None:
            return
        relay.members.discard(key)
        if not relay.members:
            del self._relays[org]
            if relay.task is not None:
                relay.task.cancel()

    async def _relay(self, org: str, relay: _Relay) -> None:
        """Relay org `org`'s group to this process's subscribers until released (cancelled).

        One channel for the relay's whole life: a receive that fails (a Redis read timing out on
        a loaded host) is retried on the same channel, still in the group, so the frames sent
        meanwhile wait in it and are delivered — a new channel would leave them in the old one.
        What this cannot save: a frame Redis popped just as the read timed out (channels-redis
        backs a frame up only once the reply is read; the connection is dropped with it) — with
        reads given 15 s past the 5 s pop, a stall of ~10 s; the stream's store catch-up
        (`AGENTS_SSE_CATCHUP_SECONDS`) then brings the event.
        """
        group = group_name(org)
        channel = None
        refresher = None
        try:
            while True:
                try:
                    if channel is None:
                        channel = await self.layer.new_channel(CHANNEL_PREFIX)
                    await self.layer.group_add(group, channel)  # again after a failure: a no-op, or a lapsed membership renewed
                    if refresher is None:
                        refresher = asyncio.create_task(self._refresh(group, channel))
                    relay.ready.set()
                    while True:
                        message = await self.layer.receive(channel)
                        frame = message.get("frame")
                        if isinstance(frame, dict):
                            self.fanout.deliver(org, frame)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    self.relay_failures += 1
                    logger.warning("session bus: relay for %s failed; retrying", org, exc_info=True)
                    await asyncio.sleep(RETRY_SECONDS)
        finally:
            if refresher is not None:
                refresher.cancel()
            if channel is not None:
                with contextlib.suppress(Exception):
                    await self.layer.group_discard(group, channel)

    async def _refresh(self, group: str, channel: str) -> None:
        # Group membership expires in the layer (channels-redis: a day); renew it.
        while True:
            await asyncio.sleep(self.group_refresh_seconds)
            with contextlib.suppress(Exception):
                await self.layer.group_add(group, channel)

    # --- mailboxes ---------------------------------------------------------------------

    def mailbox_open(self) -> LayerMailbox:
        """Create a mailbox on a fresh layer channel (`agents.<client>!<hex>` with Redis)."""
        self._not_on_loop()
        name = self._runner.submit(self.layer.new_channel(CHANNEL_PREFIX)).result(timeout=10)
        mailbox = LayerMailbox(self, name)
        mailbox._pump = self._runner.submit(self._pump(mailbox))
        return mailbox

    async def _pump(self, mailbox: LayerMailbox) -> None:
        while True:
            try:
                message = await self.layer.receive(mailbox.name)
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.warning("session bus: receive on %s failed; retrying", mailbox.name, exc_info=True)
                await asyncio.sleep(RETRY_SECONDS)
                continue
            mailbox.queue.put(message)

    def send(self, name: str, message: dict, *, timeout: float = 5.0) -> None:
        """Send `message` to channel `name` through the layer; `BusError` if it cannot."""
        self._not_on_loop()
        future = self._runner.submit(self.layer.send(name, message))
        try:
            future.result(timeout=timeout)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise BusError(f"the channel layer did not take the message within {timeout:g} s") from exc
        except Exception as exc:
            raise BusError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from exc

    def _not_on_loop(self) -> None:
        if self._runner.on_loop():
            raise RuntimeError("a blocking bus call was made on the bus loop itself")

    def close(self) -> None:
        """Cancel the relays and the sender, close the layer's connections, stop the loop."""
        self._closed = True
        _live_buses.discard(self)
        with contextlib.suppress(Exception):
            self._runner.submit(self._shutdown()).result(timeout=5)
        self._runner.stop()

    async def _shutdown(self) -> None:
        self._relays.clear()
        tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        close_pools = getattr(self.layer, "close_pools", None)
        if close_pools is not None:
            with contextlib.suppress(Exception):
                await close_pools()
