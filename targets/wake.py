"""Wake-ups for waiting claims, delivered over the Channels layer.

Each (org, target) has one group. A waiting claim subscribes a fresh channel to its group and
sleeps on `receive`; whoever changes that target's mailbox (an offer, a key rotation, a
delete) sends one message to the group after its transaction commits. The message carries no
data: the store is the source of truth, so a woken claim re-reads it. A lost wake-up costs
latency, never a run (the claim re-checks the store once more when its wait ends).

Loops: the in-memory layer's queues belong to the event loop that waits on them, and
channels-redis allows one receiving loop per process. Waiting claims all run on the server's
one loop (daphne's); `notify` delivers from sync code onto that loop, wherever it is called
from (a request's worker thread, a plain thread, a task).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import router, transaction

from tenancy import stores
from targets.models import RoutedRun

logger = logging.getLogger(__name__)

_WAKE = {"type": "target.wake"}
_home_loop: asyncio.AbstractEventLoop | None = None
_home_lock = threading.Lock()
# Subscribing and leaving are short layer calls; a burst of a thousand claims would otherwise
# open a thousand Redis connections at once (redis-py refuses past its pool's 100).
MAX_CONCURRENT_LAYER_CALLS = 32
_gates: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
# Claims of this process subscribed to each group right now (see `waiting_claims`).
_waiting: dict[str, int] = {}
_waiting_lock = threading.Lock()


def waiting_claims(*, org: str, target_id: str) -> int:
    """Return how many claims of this process are subscribed to (org, target)'s wake-ups now.

    A claim counts from the moment an offer would wake it until it leaves; tests wait on this
    instead of sleeping "until the claim waits", and it tells an operator what a process holds.
    """
    with _waiting_lock:
        return _waiting.get(group_name(org=org, target_id=target_id), 0)


def _count(group: str, delta: int) -> None:
    with _waiting_lock:
        left = _waiting.get(group, 0) + delta
        if left > 0:
            _waiting[group] = left
        else:
            _waiting.pop(group, None)


def _gate() -> asyncio.Semaphore:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        for old in [known for known in _gates if known.is_closed()]:
            del _gates[old]
        gate = _gates[loop] = asyncio.Semaphore(MAX_CONCURRENT_LAYER_CALLS)
    return gate


def group_name(*, org: str, target_id: str) -> str:
    """Return the channel-layer group of (org, target): `targets.<sha256[:40]>`.

    Hashed because group names allow only ASCII letters, digits, `-_.` and < 100 characters.
    """
    digest = hashlib.sha256(f"{org}\x00{target_id}".encode()).hexdigest()[:40]
    return f"targets.{digest}"


def remember_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Record the loop waiting claims run on (the loop `notify` delivers onto)."""
    global _home_loop
    with _home_lock:
        _home_loop = loop


def _live_home() -> asyncio.AbstractEventLoop | None:
    loop = _home_loop
    if loop is None or loop.is_closed() or not loop.is_running():
        return None
    return loop


async def notify_async(*, org: str, target_id: str) -> None:
    """Wake every claim waiting on (org, target). Errors are logged, never raised."""
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async with _gate():
            await layer.group_send(group_name(org=org, target_id=target_id), dict(_WAKE))
    except Exception:  # a lost wake-up costs latency only: the store is re-read at the end
        logger.warning("could not wake claims of target %s", target_id, exc_info=True)


def notify(*, org: str, target_id: str) -> None:
    """Wake every claim waiting on (org, target) from sync code; best effort, never raises.

    Call it after the change committed (`transaction.on_commit`). Not from inside a running
    event loop's own thread (use `notify_async` there).
    """
    if get_channel_layer() is None:
        return
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is not None:  # sync code on a loop's own thread: schedule, never block it
        running.create_task(notify_async(org=org, target_id=target_id))
        return
    home = _live_home()
    try:
        if home is not None:
            asyncio.run_coroutine_threadsafe(notify_async(org=org, target_id=target_id), home).result(timeout=5)
        else:
            async_to_sync(notify_async)(org=org, target_id=target_id)
    except Exception:
        logger.warning("could not wake claims of target %s", target_id, exc_info=True)


def notify_on_commit(*, target_id: str) -> None:
    """Wake the current org's claims waiting on `target_id` once the current transaction commits."""
    org = stores.current_org()
    transaction.on_commit(lambda: notify(org=org, target_id=target_id), using=router.db_for_write(RoutedRun))


class Subscription:
    """A waiting claim's subscription to its (org, target) group (`async with`).

    If the layer fails (Redis down, pool exhausted), the subscription degrades to a plain
    sleep: the claim then finds its work at the end-of-window read, never loses it.
    """

    def __init__(self, *, org: str, target_id: str) -> None:
        self.group = group_name(org=org, target_id=target_id)
        self.layer = get_channel_layer()
        self.channel: str | None = None
        self.degraded = False  # a receive failed: later waits sleep (the channel still leaves the group on exit)

    async def __aenter__(self) -> Subscription:
        if self.layer is not None:
            remember_loop(asyncio.get_running_loop())
            try:
                async with _gate():
                    channel = await self.layer.new_channel()
                    await self.layer.group_add(self.group, channel)
                self.channel = channel
            except Exception:
                logger.warning("could not subscribe to %s; waiting without wake-ups", self.group, exc_info=True)
        _count(self.group, +1)
        return self

    async def wait(self, timeout: float) -> bool:
        """Sleep until a wake-up arrives or `timeout` seconds pass; return True if woken."""
        if timeout <= 0:
            return False
        if self.layer is None or self.channel is None or self.degraded:
            await asyncio.sleep(timeout)
            return False
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await asyncio.wait_for(self.layer.receive(self.channel), timeout)
            return True
        except asyncio.TimeoutError:
            return False
        except Exception:
            logger.warning("wake-ups of %s failed; waiting without them", self.group, exc_info=True)
            self.degraded = True
            await asyncio.sleep(max(deadline - loop.time(), 0))
            return False

    async def __aexit__(self, *exc) -> None:
        _count(self.group, -1)
        if self.layer is not None and self.channel is not None:
            try:
                async with _gate():
                    await self.layer.group_discard(self.group, self.channel)
            except Exception:
                logger.warning("could not leave group %s", self.group, exc_info=True)
