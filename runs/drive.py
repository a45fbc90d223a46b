"""One run's code, two ways of waiting: a thread that blocks, or the event loop (issue 26 item 1).

The run path — the agent loop (`RunLoop`), a run's settling and finish, a conversation round,
an OpenAI-compatible call — is written once, as generators of *steps*: plain synchronous code
(store transactions, masking, tool bookkeeping) between the points where the run waits. At
each such point the generator yields what it waits on:

* `Ask` — a completion from the gateway under the retry policy (seconds: the model's reply);
* `Wait` — the next steering command of a paused run (up to `seconds`);
* `Blocking` — a call that may block for long (a tool: an HTTP fetch, an MCP call, a child run).

and is sent back what it got (or has the failure thrown in). Two drivers run the same generator:

* `drive(steps)` — in the calling thread, blocking at each wait (background workers, an agent
  called as a tool, Django's test client, the stock handler);
* `await drive_async(steps)` — on the event loop: the code between waits runs on a small pool
  of step threads (`AGENTS_RUN_STEP_THREADS`, 4) inside the run's own `contextvars` context,
  each step's database connections handed back when it ends; the model is awaited with the
  async `openai` client (`complete_async`), a pause on an `asyncio` event, a tool on the tool
  threads (`AGENTS_RUN_TOOL_THREADS`, 32). A run waiting on its model holds no thread and no
  connection: 500 waiting runs are 500 suspended generators.

A step never leaves a transaction open across a wait (every transaction of the run path is
one `with` block inside one step), and the context (org, tracing span) is the run's own
`contextvars.Context`, entered by every step in turn — never by two threads at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Callable, Generator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.conf import settings

from agents_site.errors import ApiError
from tenancy import stores
from runs.hooks import completion

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: What a run's code is: a generator yielding `Ask` / `Wait` / `Blocking` and returning its value.
Steps = Generator[Any, Any, T]


@dataclass
class Ask:
    """Wait for one completion under the retry policy: the keyword arguments of
    `agents.execution.completion.complete` (models, messages, tools, timeout, on_retry, sink,
    generation, stop). Sent back: the `Answered`; thrown in: `CompletionFailed` / `CompletionStopped`."""

    kwargs: dict = field(default_factory=dict)

    def run(self):
        """Block for the completion (the sync driver)."""
        return completion()[0](**self.kwargs)

    async def run_async(self):
        """Await the completion on the event loop (the async driver)."""
        return await completion()[1](**self.kwargs)


@dataclass
class Wait:
    """Wait up to `seconds` for the next steering command of `session` (a paused run). Sent back:
    the command (a dict) or None when none came in time."""

    session: Any
    seconds: float

    def run(self):
        """Block on the session's inbox (the sync driver)."""
        return self.session.wait(self.seconds)


@dataclass
class Blocking:
    """Call `fn(*args, **kwargs)`, which may block for long (a tool). Sent back: its value; thrown in: what it raised."""

    fn: Callable
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def run(self):
        """Call it here (the sync driver)."""
        return self.fn(*self.args, **self.kwargs)


def at_once(value: T) -> Steps[T]:
    """Return run steps that wait on nothing and return `value` (e.g. a replayed run's answer)."""
    return value
    yield  # a generator: the drivers take it like any run's steps


def drive(steps: Steps[T]) -> T:
    """Run `steps` to the end in the calling thread, blocking at each wait; return its value.

    What a step raises propagates; what a wait raises is thrown into the generator at its `yield`.
    """
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return done.value
        value, error = None, None
        try:
            value = op.run()
        except Exception as exc:
            error = exc


# -- the async driver ---------------------------------------------------------------------------------

_pools_lock = threading.Lock()
_step_pool: ThreadPoolExecutor | None = None
_tool_pool: ThreadPoolExecutor | None = None


def _pools() -> tuple[ThreadPoolExecutor, ThreadPoolExecutor]:
    global _step_pool, _tool_pool
    with _pools_lock:
        if _step_pool is None:
            _step_pool = ThreadPoolExecutor(max_workers=max(1, int(settings.AGENTS_RUN_STEP_THREADS)), thread_name_prefix="agents-step")
            _tool_pool = ThreadPoolExecutor(max_workers=max(1, int(settings.AGENTS_RUN_TOOL_THREADS)), thread_name_prefix="agents-tool")
        return _step_pool, _tool_pool


class _Done:
    def __init__(self, value) -> None:
        self.value = value


def _advance(steps: Steps, value, error):
    """Run the generator to its next wait (in a step thread, inside the run's context); return the
    wait, or `_Done` with its value. The step's connections go back to their pools as it ends."""
    try:
        try:
            op = steps.throw(error) if error is not None else steps.send(value)
        except StopIteration as done:
            return _Done(done.value)
        return op
    finally:
        stores.release_connections()


async def _command_arrived(session, seconds: float, arrived: dict) -> None:
    """Wait up to `seconds` for `session`'s inbox to receive a command (no thread held)."""
    loop = asyncio.get_running_loop()
    event = arrived.get("event")
    if event is None:
        event = arrived["event"] = asyncio.Event()
        session.on_command(lambda _command: loop.call_soon_threadsafe(event.set))
    try:
        await asyncio.wait_for(event.wait(), timeout=max(seconds, 0.0))
    except TimeoutError:
        pass
    event.clear()


async def drive_async(steps: Steps[T], *, context: contextvars.Context | None = None) -> T:
    """Run `steps` to the end on the running event loop; return its value (see the module text).

    `context`: the run's `contextvars.Context` (default: a copy of the caller's), entered by
    every step and every awaited completion. Cancelling the awaiting task cancels the awaited
    completion and closes the generator at its wait (its `finally` blocks run on a step thread).
    """
    loop = asyncio.get_running_loop()
    ctx = context if context is not None else contextvars.copy_context()
    step_pool, tool_pool = _pools()
    value: Any = None
    error: BaseException | None = None
    arrived: dict = {}
    step = None
    try:
        while True:
            step = loop.run_in_executor(step_pool, ctx.run, _advance, steps, value, error)
            op = await step
            if isinstance(op, _Done):
                return op.value
            value, error = None, None
            try:
                if isinstance(op, Ask):
                    value = await asyncio.create_task(op.run_async(), context=ctx)
                elif isinstance(op, Wait):
                    await _command_arrived(op.session, op.seconds, arrived)
                    value = await loop.run_in_executor(step_pool, ctx.run, op.session.wait, 0)
                elif isinstance(op, Blocking):
                    value = await loop.run_in_executor(tool_pool, ctx.copy().run, op.run)
                else:
                    raise TypeError(f"a run step yielded {op!r}")
            except Exception as exc:
                error = exc
    except BaseException:
        if step is not None and not step.done():  # a step still running on its thread: let it end first
            await asyncio.wait([step])
        await _close(steps, ctx, step_pool)
        raise


async def _close(steps: Steps, ctx: contextvars.Context, pool: ThreadPoolExecutor) -> None:
    """Close an abandoned generator on a step thread (its `finally` blocks write to the store)."""
    loop = asyncio.get_running_loop()
    try:
        await asyncio.shield(loop.run_in_executor(pool, ctx.run, steps.close))
    except BaseException:
        logger.debug("closing an abandoned run's steps failed", exc_info=True)


# -- starting work on the loop from a view's thread -----------------------------------------------------

_running: set[Future] = set()
_running_lock = threading.Lock()


def start_on_loop(loop: asyncio.AbstractEventLoop, make: Callable[[], Any]) -> Future:
    """Start the coroutine `make()` on `loop` (the server's event loop) from another thread and
    return its `concurrent.futures.Future`. The work runs to its end whatever becomes of the
    request that started it (a client that leaves does not stop a started run): the future is
    kept here until it is done."""
    future = asyncio.run_coroutine_threadsafe(make(), loop)
    with _running_lock:
        _running.add(future)
    future.add_done_callback(_forget)
    return future


def _forget(future: Future) -> None:
    with _running_lock:
        _running.discard(future)
    error = None if future.cancelled() else future.exception()
    # An `ApiError` is an answer (a 503 `inference_unavailable`, a 402): the deferred response
    # renders it and the request's log line says it; only a fault is logged here (issue 51).
    if error is not None and not isinstance(error, ApiError):
        logger.error("work started on the event loop failed", exc_info=error)


def work_in_flight() -> int:
    """Return how many pieces of work `start_on_loop` started are not done yet (tests, shutdown)."""
    with _running_lock:
        return len(_running)
