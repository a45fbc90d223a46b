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
    return _poll(predicate, time.sleep, timeout=timeout, interval=interval, what=what)


def _poll(predicate, pause, *, timeout: float, interval: float, what: str):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        pause(interval)


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


def page_until(page, predicate, *, timeout: float = 30.0, interval: float = 0.02, what: str = "condition"):
    """`wait_until` for a test driving a Playwright page: pauses with `page.wait_for_timeout`,
    during which Playwright runs the page's route handlers (a `time.sleep` would hold them back).
    Returns the first truthy value; AssertionError naming `what` after `timeout` seconds."""
    return _poll(predicate, lambda seconds: page.wait_for_timeout(seconds * 1000), timeout=timeout, interval=interval, what=what)
