"""Run steps driven blocking and on the event loop (runs/drive.py, issue 26 item 1)."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest

from runs.drive import Blocking, at_once, drive, drive_async
from tests.support.waiting import until

marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="")


class Boom(Exception):
    pass


def steps(seen: list):
    """Steps that set a context variable, wait on two blocking calls (the second fails) and return."""
    marker.set("run-1")
    seen.append(("start", threading.current_thread().name))
    first = yield Blocking(lambda: 20)
    seen.append(("after first", marker.get(), threading.current_thread().name))
    try:
        yield Blocking(_fail)
    except Boom as exc:
        seen.append(("caught", str(exc), marker.get()))
    return first + 1


def _fail():
    raise Boom("the tool failed")


def test_the_same_steps_give_the_same_answer_driven_blocking_or_on_the_loop():
    blocking: list = []
    assert drive(steps(blocking)) == 21
    looped: list = []
    assert asyncio.run(drive_async(steps(looped))) == 21
    assert [entry[0] for entry in blocking] == [entry[0] for entry in looped] == ["start", "after first", "caught"]
    # The failure of a wait is thrown in at its yield, the context lasts across waits, on either driver.
    assert blocking[2] == looped[2] == ("caught", "the tool failed", "run-1")
    assert looped[1][1] == "run-1"
    # On the loop the steps run on the step threads, never on the loop's own thread.
    assert all(entry[-1].startswith("agents-step") for entry in looped[:2])


def test_a_step_that_raises_fails_the_drive():
    def failing():
        yield Blocking(lambda: None)
        raise Boom("bug")

    with pytest.raises(Boom):
        drive(failing())
    with pytest.raises(Boom):
        asyncio.run(drive_async(failing()))


def test_steps_that_wait_on_nothing_answer_at_once():
    assert drive(at_once("done")) == "done"
    assert asyncio.run(drive_async(at_once("done"))) == "done"


def test_cancelling_the_awaiting_task_closes_the_steps_so_their_finally_runs():
    closed = threading.Event()
    started = threading.Event()
    release = threading.Event()

    def long_wait():
        try:
            yield Blocking(lambda: (started.set(), release.wait(10)))
        finally:
            closed.set()

    async def main():
        task = asyncio.create_task(drive_async(long_wait()))
        await until(started.is_set, what="the tool to start")
        task.cancel()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert closed.wait(5)
