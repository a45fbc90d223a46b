"""Run one command as its own process tree, bounded, and kill the whole tree when it must stop.

`run_process` is the one place a sandboxed command (bubblewrap, the unconfined runner) or the
runner's `shell` tool is started. The command starts a new session (`setsid`), so its process
group holds everything it forks unless a child leaves the session on purpose (bubblewrap's
confinement does not depend on that: its `--die-with-parent` and pid namespace kill every
process of the sandbox when the outer `bwrap` dies). The group is SIGKILLed when the command:

- exits (anything it left running in its group goes with it),
- passes its wall-clock limit (`Result.timed_out`),
- prints more than its output limit (`Result.truncated`),
- or is cancelled by its caller (`asyncio` task cancellation): then `CommandCancelled` is
  raised — a `CancelledError` carrying the `Result` so far (`cancelled=True`, the output read
  until the stop), so a caller can record what the command printed before it was stopped.

`run_blocking` runs such a coroutine to completion from synchronous code (the server's
current loop), on this thread or, when this thread already runs an event loop, on a helper one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar


@dataclass
class Result:
    """What a command did: its exit code (None when killed), merged stdout+stderr, and why it stopped.

    `timed_out` — killed at the wall-clock limit; `truncated` — the output limit was reached
    and the command was stopped; `cancelled` — its caller stopped it (the run was stopped).
    """

    exit_code: int | None
    output: str
    timed_out: bool = False
    truncated: bool = False
    cancelled: bool = False

    def for_model(self) -> str:
        """Return the result as the model reads it: output, then one line saying how it ended."""
        tail = []
        if self.truncated:
            tail.append("[output limit reached: the command was stopped]")
        if self.timed_out:
            tail.append("[time limit reached: the command was killed]")
        elif self.cancelled:
            tail.append("[the run was stopped: the command was killed]")
        elif self.exit_code is not None:
            tail.append(f"[exit code {self.exit_code}]")
        else:
            tail.append("[the command was killed]")
        return (self.output.rstrip("\n") + "\n" if self.output else "") + "\n".join(tail)


DRAIN_SECONDS = 5.0  # how long output still buffered in the pipe is read after the group is killed

T = TypeVar("T")


class CommandCancelled(asyncio.CancelledError):
    """The caller cancelled a running command; its whole process tree was killed.

    `result` is what the command had done: `exit_code` None, `cancelled` True and `output` the
    text it printed before the stop (unmasked: the caller masks it before storing or showing it).
    """

    def __init__(self, result: Result) -> None:
        super().__init__("the command was stopped")
        self.result = result


def kill_group(pid: int) -> None:
    """SIGKILL process group `pid` (a command started by `run_process`); never raises."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


class _Collector(asyncio.SubprocessProtocol):
    """Keep the first `limit` bytes of the merged output (the rest is read and dropped, so the pipe
    never fills) and note exit, end of output, and the limit being reached."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.output = bytearray()
        self.truncated = False
        self.stopped = asyncio.Event()  # exited, or printed past the limit
        self.exited = asyncio.Event()
        self.eof = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        room = self.limit - len(self.output)
        if room > 0:
            self.output.extend(data[:room])
        if len(self.output) >= self.limit and not self.truncated:
            self.truncated = True
            self.stopped.set()

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.eof.set()

    def process_exited(self) -> None:
        self.exited.set()
        self.stopped.set()

    def result(self, exit_code: int | None, **flags: bool) -> Result:
        return Result(exit_code=exit_code, output=bytes(self.output).decode("utf-8", errors="replace"), **flags)


async def run_process(argv: Sequence[str], *, env: dict[str, str], cwd: Path | str | None = None,
                      timeout_seconds: float, output_bytes: int) -> Result:
    """Run `argv` in a new session with `env` (nothing inherited) and return its `Result`.

    stdout and stderr are merged and kept up to `output_bytes` bytes; `timeout_seconds` is the
    wall-clock limit (at least 0.1 s). Raises `CommandCancelled` (a `CancelledError`) when the
    awaiting task is cancelled, after the process group was killed and reaped.
    """
    loop = asyncio.get_running_loop()
    collector = _Collector(max(int(output_bytes), 0))
    # The start is shielded: a cancel arriving while asyncio wires up the pipes would otherwise
    # kill only the direct child and leave what it already forked running.
    spawn = asyncio.ensure_future(loop.subprocess_exec(
        lambda: collector, *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True, close_fds=True,
    ))
    stopped_early = False
    try:
        transport, _ = await asyncio.shield(spawn)
    except asyncio.CancelledError:
        stopped_early = True
        transport, _ = await spawn
    pid = transport.get_pid()
    timed_out = False
    try:
        if stopped_early:
            raise asyncio.CancelledError
        await asyncio.wait_for(collector.stopped.wait(), max(float(timeout_seconds), 0.1))
    except asyncio.TimeoutError:
        timed_out = True
    except asyncio.CancelledError:
        kill_group(pid)
        await _settle(transport, collector)
        raise CommandCancelled(collector.result(None, cancelled=True)) from None
    except BaseException:
        kill_group(pid)
        transport.close()
        raise
    kill_group(pid)  # what the command left in its group, or the whole tree at a limit
    await _settle(transport, collector)
    code = transport.get_returncode()
    exit_code = None if (timed_out or collector.truncated or code is None or code < 0) else code
    return collector.result(exit_code, timed_out=timed_out, truncated=collector.truncated)


async def _settle(transport: asyncio.SubprocessTransport, collector: _Collector) -> None:
    """After the kill: reap the process, read what is still in the pipe (each bounded), close; survive a second cancel."""
    async def settle() -> None:
        try:
            for event in (collector.exited, collector.eof):
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(event.wait(), DRAIN_SECONDS)
        finally:
            transport.close()

    task = asyncio.ensure_future(settle())
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task  # the group is already killed: reaping it is quick
        raise


def run_blocking(make: Callable[[], Awaitable[T]]) -> T:
    """Run the coroutine `make()` to completion from synchronous code and return its value.

    Runs it on a fresh event loop on this thread, or on a helper thread when this thread is
    already running a loop (a sync call made from async code).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    box: dict = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(make())
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="toolkit-blocking", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
