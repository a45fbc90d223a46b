"""Request threads reused across requests (agents_site/asgi.py `ExecutorPool`)."""

from __future__ import annotations

import threading

from agents_site.asgi import ExecutorPool


def _thread_of(executor) -> int:
    return executor.submit(threading.get_ident).result(5)


def test_an_idle_executor_serves_the_next_request_on_the_same_thread():
    pool = ExecutorPool(idle_max=4)
    first = pool.take()
    thread = _thread_of(first)
    pool.give(first)

    again = pool.take()
    assert again is first and _thread_of(again) == thread
    pool.give(again)


def test_an_executor_still_running_abandoned_work_is_retired_not_reused():
    """A request cancelled mid-call leaves its sync work running: no later request may queue behind it."""
    pool = ExecutorPool(idle_max=4)
    executor = pool.take()
    release = threading.Event()
    stuck = executor.submit(release.wait, 30)
    assert executor.busy
    pool.give(executor)

    other = pool.take()
    assert other is not executor
    assert other.submit(lambda: "served").result(5) == "served"  # not behind the stuck call
    release.set()
    assert stuck.result(5) is True
    pool.give(other)


def test_no_more_than_idle_max_executors_are_kept():
    pool = ExecutorPool(idle_max=2)
    executors = [pool.take() for _ in range(4)]
    for executor in executors:
        _thread_of(executor)
    for executor in executors:
        pool.give(executor)
    kept = {id(pool.take()) for _ in range(2)}
    assert kept <= {id(e) for e in executors[:2]}
    assert pool.take() not in executors  # the others were shut down
