"""Wait on a condition, never on a guessed duration.

A fixed `sleep` used to let something happen (a subscriber attach, a thread start, a call
begin) passes on a quiet machine and fails under load; these poll the condition itself and
fail with what they waited for once `timeout` seconds pass (generous bounds: a loaded 2-core
CI box is slow, never that slow). `tests.support.qcluster.wait_for` is the same for the
cluster tests.
"""

from __future__ import annotations

import asyncio
import time


def wait_until(predicate, *, timeout: float = 30.0, interval: float = 0.01, what: str = "condition"):
    """Poll `predicate()` every `interval` s; return its first truthy value.

    Raises AssertionError naming `what` after `timeout` seconds without one.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


async def until(predicate, *, timeout: float = 30.0, interval: float = 0.005, what: str = "condition"):
    """`wait_until` for a coroutine: poll `predicate()` without blocking the running event loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(interval)
