"""A run's stop as a thread-safe signal that interrupts what the run is waiting on (issue 25).

`StopSignal` is set once, from any thread (the process's steering hub when a `stop` command
reaches the run's inbox, a parent run's own signal, the runner's control watcher). Whatever
the run is blocked on registers a callback with `on_stop` for the time it waits, and the
callback interrupts it at once:

- a streamed gateway completion: `watching(signal)` marks the calling thread's HTTP reads, and
  a network stream wrapped by `WatchedBackend` shuts its socket down when the signal is set
  (the blocked read returns, the response is closed, the HTTP request is cancelled);
- a sandboxed command: `run_stoppable` runs the command's coroutine on an event loop and
  cancels its task when the signal is set (the sandbox kills the whole process tree and raises
  `CommandCancelled` carrying the output so far);
- a child run (an agent called as a tool): its signal is `signal.child()`, set with its parent's.

Nothing here imports the server: the runner uses it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from toolkit.wire import ControlCommand

T = TypeVar("T")


class StopSignal:
    """A stop that may come from another thread: `set(command)` once; callbacks fire at once.

    `command` is what was received (the `stop` command's dict: `seq`, `message`, `payload`,
    `actor`…; None for a stop with no command, e.g. a parent's). `on_stop(callback)` calls
    `callback()` when the signal is set (at once if it already is) and returns the function
    that unregisters it. A callback must not raise (what it raises is swallowed).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._callbacks: list[Callable[[], None]] = []
        self.command: dict | None = None

    def is_set(self) -> bool:
        """Return True once the stop was received."""
        return self._event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the stop is received or `timeout` seconds pass; return whether it was."""
        return self._event.wait(timeout)

    def set(self, command: dict | None = None) -> bool:
        """Receive the stop (first call wins); fire every callback. Return True if this call set it."""
        with self._lock:
            if self._event.is_set():
                return False
            self.command = command
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            _call(callback)
        return True

    def on_stop(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call `callback()` when the stop is received (now, if it was); return the unregistering function."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)
                return lambda: self._forget(callback)
        _call(callback)
        return lambda: None

    def _forget(self, callback: Callable[[], None]) -> None:
        with self._lock:
            with contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

    def child(self) -> StopSignal:
        """Return a new signal set whenever this one is (a child run stops with its parent)."""
        child = StopSignal()
        self.on_stop(lambda: child.set({"command": ControlCommand.STOP, "parent": True, **(self.command or {})}))
        return child


def _call(callback: Callable[[], None]) -> None:
    try:
        callback()
    except Exception:  # an interruption that fails must not keep the others from running
        pass


class Stopped(Exception):
    """What the run waited on was interrupted by its stop."""


# -- HTTP reads -------------------------------------------------------------------------------
_watching: contextvars.ContextVar[StopSignal | None] = contextvars.ContextVar("agents_stop_watching", default=None)


@contextlib.contextmanager
def watching(signal: StopSignal | None) -> Iterator[None]:
    """While inside, every read or write of a `WatchedBackend` stream on this thread (or task) is
    interrupted by `signal` (None: nothing is watched)."""
    token = _watching.set(signal)
    try:
        yield
    finally:
        _watching.reset(token)


def _shutdown(sock) -> None:
    """Shut a socket down both ways (wakes a read blocked on it in another thread); never raises."""
    if sock is None:
        return
    with contextlib.suppress(OSError, ValueError, TypeError):
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: an SSL socket's own would drop its state


class _WatchedStream:
    """A network stream (httpcore's interface) whose reads and writes a `StopSignal` interrupts."""

    def __init__(self, inner) -> None:
        self._inner = inner

    def _guarded(self, operation: Callable[[], T], error: type[Exception]) -> T:
        signal = _watching.get()
        if signal is None:
            return operation()
        if signal.is_set():
            self.close()
            raise error("the run was stopped")
        undo = signal.on_stop(lambda: _shutdown(self._inner.get_extra_info("socket")))
        try:
            return operation()
        finally:
            undo()
            if signal.is_set():
                self.close()

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        from httpcore2 import ReadError

        return self._guarded(lambda: self._inner.read(max_bytes, timeout), ReadError)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        from httpcore2 import WriteError

        return self._guarded(lambda: self._inner.write(buffer, timeout), WriteError)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, *args, **kwargs):
        return _WatchedStream(self._inner.start_tls(*args, **kwargs))

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class WatchedBackend:
    """An httpcore network backend whose streams a `StopSignal` interrupts (see `watching`).

    Wraps the pool's own backend (`WatchedBackend(pool._network_backend)`); a connection made
    while no signal is watched behaves exactly as before.
    """

    def __init__(self, inner) -> None:
        self._inner = inner

    def connect_tcp(self, *args, **kwargs):
        signal = _watching.get()
        if signal is not None and signal.is_set():
            from httpcore2 import ConnectError

            raise ConnectError("the run was stopped")
        return _WatchedStream(self._inner.connect_tcp(*args, **kwargs))

    def connect_unix_socket(self, *args, **kwargs):
        return _WatchedStream(self._inner.connect_unix_socket(*args, **kwargs))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


# -- commands -----------------------------------------------------------------------------------
def run_stoppable(make: Callable[[], Awaitable[T]], signal: StopSignal | None) -> T:
    """Run the coroutine `make()` to completion from synchronous code and return its value; when
    `signal` is set meanwhile, cancel it (a sandboxed command's tree is killed: the sandbox raises
    `CommandCancelled` with the output so far, re-raised here).

    Runs on a fresh event loop on a helper thread (this thread may already run a loop). Never
    wraps the coroutine in `asyncio.wait_for`: the cancellation is the caller's own, so the
    sandbox's `CommandCancelled` comes back out unchanged.
    """
    box: dict = {}

    async def main() -> T:
        task = asyncio.ensure_future(make())
        loop = asyncio.get_running_loop()
        undo = signal.on_stop(lambda: loop.call_soon_threadsafe(task.cancel)) if signal is not None else (lambda: None)
        try:
            return await task
        finally:
            undo()

    def target() -> None:
        try:
            box["value"] = asyncio.run(main())
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="toolkit-stoppable", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
