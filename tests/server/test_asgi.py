"""Request threads reused across requests (server/asgi.py `ExecutorPool`)."""

from __future__ import annotations

import threading

from server.asgi import ExecutorPool


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


def _http_scope(method: str, path: str) -> dict:
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"testserver")], "client": ("127.0.0.1", 5000), "server": ("testserver", 80)}


async def _status_of(handler, method: str, path: str) -> int:
    from asgiref.testing import ApplicationCommunicator

    communicator = ApplicationCommunicator(handler, _http_scope(method, path))
    await communicator.send_input({"type": "http.request", "body": b"", "more_body": False})
    start = await communicator.receive_output(timeout=30)
    await communicator.wait(timeout=30)
    return start["status"]


def test_a_read_never_queues_behind_writes_waiting_for_a_thread(settings):
    """Every write thread busy (a burst of run starts): a GET still answers at once from the read
    lane, while a POST waits for a write thread and answers when one is handed back."""
    import asyncio

    from server.asgi import AgentsASGIHandler

    settings.AGENTS_REQUEST_THREADS = 1
    settings.AGENTS_READ_REQUEST_THREADS = 1

    async def scenario():
        handler = AgentsASGIHandler()
        held = await handler._request_executors.acquire()  # the only write thread, taken by "a burst"
        write = asyncio.ensure_future(_status_of(handler, "POST", "/v1/agents"))
        assert await _status_of(handler, "GET", "/v1/agents") == 403  # answered (no credentials) while the write lane is full
        assert not write.done()  # the POST still waits for a write thread
        handler._request_executors.release(held)
        assert await asyncio.wait_for(write, 30) == 403
        return True

    assert asyncio.run(scenario())
