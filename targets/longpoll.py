"""The claim long-poll: wait on the channel layer, never poll the store in a loop.

Spec 003: POST /v1/agents/targets/{id}/claim. A claim checks both proofs and stamps liveness,
subscribes to its (org, target) wake-up group, then reads the mailbox: once at once, once after
each wake-up and once when the wait ends. Between those reads it sleeps on the channel layer,
costing no query. A claim whose client left after it won an offer puts the offer back.
"""

from __future__ import annotations

import asyncio

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connections

from targets import keys, mailbox, wake
from targets.models import RoutedRun
from tenancy import stores


def claim_wait_seconds() -> float:
    """Return how long a claim waits for work (seconds; `AGENTS_CLAIM_WAIT_SECONDS`, default 25)."""
    return float(getattr(settings, "AGENTS_CLAIM_WAIT_SECONDS", 25))


async def claim_wait(*, target_id: str, subject: str, is_org_admin: bool, key: object, wait_seconds: float | None = None) -> RoutedRun | None:
    """Wait up to `wait_seconds` for the next run offered to target `target_id`; return it.

    Must run in the caller's org context (the ContextVar set by the middleware). Returns the
    won `RoutedRun`, or None when the window elapsed with no work (→ 204). Raises
    `ClaimRejected` (403) when a proof fails at the start, or when the key is rotated or the
    target deleted while waiting.
    """
    org = stores.current_org()
    wait_seconds = claim_wait_seconds() if wait_seconds is None else wait_seconds
    key_hash = await sync_to_async(_released(_begin))(target_id=target_id, subject=subject, is_org_admin=is_org_admin, key=key)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_seconds
    async with wake.Subscription(org=org, target_id=target_id) as subscription:
        while True:
            won = await _claim_once(target_id=target_id, key_hash=key_hash)
            if won is not None:
                return won
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            woken = await subscription.wait(remaining)
            if not woken:  # the window elapsed: one last read of the store, then 204
                return await _claim_once(target_id=target_id, key_hash=key_hash)


def _begin(*, target_id: str, subject: str, is_org_admin: bool, key: object) -> str:
    """Check both proofs and stamp liveness; give up runs this machine held and never reported."""
    key_hash = keys.claim_verify(target_id=target_id, subject=subject, is_org_admin=is_org_admin, key=key)
    mailbox.routed_expire(target_id=target_id)
    return key_hash


def _released(function):
    """Wrap `function` to close this thread's idle database connections after it ran.

    A waiting claim then holds no connection (nor its page cache) while it sleeps; the next
    read reopens one. Django closes them at the end of the request anyway (CONN_MAX_AGE=0).
    A connection inside a transaction is left alone.
    """

    def call(**kwargs):
        try:
            return function(**kwargs)
        finally:
            for connection in connections.all(initialized_only=True):
                if not connection.in_atomic_block:
                    connection.close()

    return call


async def _claim_once(*, target_id: str, key_hash: str) -> RoutedRun | None:
    task = asyncio.ensure_future(sync_to_async(_released(mailbox.routed_claim_next))(target_id=target_id, key_hash=key_hash))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        # The client left while the store was being read: if this claim won, give it back.
        won = await task
        if won is not None:
            await sync_to_async(mailbox.routed_release)(run_id=won.run_id)
        raise
