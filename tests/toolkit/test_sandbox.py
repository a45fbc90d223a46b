"""A stop reaches inside the sandbox: a cancelled command's whole process tree is gone (issue 25).

`arun` is awaited by a task; cancelling the task kills the command and everything it spawned,
and the stop carries what the command printed so far. The blocking `run` keeps working for
today's synchronous callers. Tests wait on conditions (files, /proc), never on durations.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from toolkit.sandbox import BubblewrapSandbox, CommandCancelled, Limits, UnconfinedCommands, Unavailable, machine_sandbox, run_blocking
from toolkit.shell import Shell

bubblewrap = pytest.mark.skipif(not BubblewrapSandbox().available(), reason="bubblewrap is not installed (scripts/test-prereqs.sh)")


def limits(**kw) -> Limits:
    return Limits(**{"timeout_seconds": 120, "cpu_seconds": 120, "memory_mb": 512, "output_bytes": 64 * 1024, **kw})


def processes() -> dict[int, tuple[int, str, str, int]]:
    """Return every process of this host: pid → (parent pid, state, name, start time)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "stat").read_text()
        except OSError:
            continue
        name = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        table[int(entry.name)] = (int(fields[1]), fields[0], name, int(fields[19]))
    return table


def descendants(root: int, *, besides: dict[int, tuple[str, int]] | None = None) -> dict[int, tuple[str, int]]:
    """Return the living descendants of `root`: pid → (name, start time), less those already in `besides`.

    `besides` is what ran before the command: in the whole suite this worker's other children
    (a live server, a gateway another test file started) live on and are not the command's.
    """
    table = processes()
    found: dict[int, tuple[str, int]] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, state, name, start) in table.items():
            if ppid == parent and pid not in found and state not in ("Z", "X"):
                found[pid] = (name, start)
                frontier.append(pid)
    return {pid: entry for pid, entry in found.items() if (besides or {}).get(pid) != entry}


def running(pid: int, start: int) -> bool:
    """Return True when process `pid` (started at `start`, so not a reused pid) still runs."""
    entry = processes().get(pid)
    return entry is not None and entry[3] == start and entry[1] not in ("Z", "X")


async def until(condition, *, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"gave up waiting for {what}")


async def cancel_midway(backend, work: Path) -> tuple[CommandCancelled, dict[int, tuple[str, int]]]:
    """Start `sleep 60` (and a child `sleep 60` it spawned) under `backend`, cancel it once both run; return the stop and the tree."""
    command = "echo started; sleep 60 & echo spawned > spawned.txt; sleep 60; echo never"
    before = descendants(os.getpid())
    task = asyncio.create_task(backend.arun(command, workdir=work, limits=limits()))
    tree = await until(lambda: (work / "spawned.txt").exists() and (found := descendants(os.getpid(), besides=before))
                       and sum(name == "sleep" for name, _ in found.values()) >= 2 and found, what="both sleeps to run")
    task.cancel()
    with pytest.raises(CommandCancelled) as caught:
        await task
    return caught.value, tree


@bubblewrap
async def test_a_cancelled_sandboxed_command_leaves_no_process_behind(tmp_path):
    before_all = descendants(os.getpid())
    stop, tree = await cancel_midway(BubblewrapSandbox(), tmp_path)
    assert {"bwrap", "sleep"} <= {name for name, _ in tree.values()}
    await until(lambda: not any(running(pid, start) for pid, (_, start) in tree.items()), what="the whole tree to be gone")
    assert not any(name in ("bwrap", "sleep", "sh") for name, _ in descendants(os.getpid(), besides=before_all).values())
    assert isinstance(stop, asyncio.CancelledError)
    assert stop.result.cancelled is True and stop.result.exit_code is None
    assert stop.result.output == "started\n"  # what it printed before the stop, nothing after
    assert "the run was stopped" in stop.result.for_model()


async def test_a_cancelled_unconfined_command_leaves_no_process_behind(tmp_path):
    stop, tree = await cancel_midway(UnconfinedCommands(), tmp_path)
    await until(lambda: not any(running(pid, start) for pid, (_, start) in tree.items()), what="the whole tree to be gone")
    assert stop.result.output == "started\n"


async def test_a_cancelled_shell_command_is_killed_with_its_children(tmp_path):
    shell = Shell(tmp_path)
    before = descendants(os.getpid())
    task = asyncio.create_task(shell({"command": "sleep 60 & echo spawned > spawned.txt; sleep 60"}))
    tree = await until(lambda: (tmp_path / "spawned.txt").exists() and (found := descendants(os.getpid(), besides=before))
                       and sum(name == "sleep" for name, _ in found.values()) >= 2 and found, what="both sleeps to run")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: not any(running(pid, start) for pid, (_, start) in tree.items()), what="the whole tree to be gone")


async def test_a_loop_that_catches_the_stop_reads_the_output_so_far(tmp_path):
    """How a run loop uses it: the stop propagates as a CancelledError; its result is the partial output."""
    recorded: list[str] = []

    async def step() -> None:
        try:
            await UnconfinedCommands().arun("echo partial; sleep 60", workdir=tmp_path, limits=limits())
        except CommandCancelled as stop:
            recorded.append(stop.result.output)
            raise

    task = asyncio.create_task(step())
    await until(lambda: any(name == "sleep" for name, _ in descendants(os.getpid()).values()), what="the command to run")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert recorded == ["partial\n"] and task.cancelled()


async def test_the_limits_still_hold_on_the_async_path(tmp_path):
    box = UnconfinedCommands()
    timed = await box.arun("echo started; sleep 60", workdir=tmp_path, limits=limits(timeout_seconds=0.5))
    assert timed.timed_out and timed.exit_code is None and timed.output == "started\n"
    cut = await box.arun("yes x", workdir=tmp_path, limits=limits(output_bytes=1000))
    assert cut.truncated and len(cut.output) == 1000 and "output limit" in cut.for_model()
    done = await box.arun("echo $HOME; exit 3", workdir=tmp_path, limits=limits())
    assert done.exit_code == 3 and done.output == f"{tmp_path.resolve()}\n" and done.for_model().endswith("[exit code 3]")


async def test_the_blocking_entry_point_runs_inside_a_running_loop_too(tmp_path):
    result = UnconfinedCommands().run("echo hi", workdir=tmp_path, limits=limits())  # on a helper thread
    assert (result.exit_code, result.output) == (0, "hi\n")
    with pytest.raises(ZeroDivisionError):
        run_blocking(lambda: _divide())


async def _divide():
    return 1 / 0


def test_the_blocking_entry_point_outside_a_loop(tmp_path):
    assert UnconfinedCommands().run("printf ok", workdir=tmp_path, limits=limits()).output == "ok"


def test_an_unavailable_sandbox_refuses_and_says_why(tmp_path):
    box = Unavailable("no sandbox here")
    assert not box.available() and box.unavailable_reason() == "no sandbox here"
    with pytest.raises(RuntimeError, match="no sandbox here"):
        box.run("true", workdir=tmp_path, limits=limits())


def test_a_machine_picks_bubblewrap_else_what_its_owner_allowed(monkeypatch):
    if BubblewrapSandbox().available():
        assert machine_sandbox(allow_unsandboxed=False).name == "bubblewrap"
    monkeypatch.setattr(BubblewrapSandbox, "available", lambda self: False)
    assert machine_sandbox(allow_unsandboxed=False) is None
    assert isinstance(machine_sandbox(allow_unsandboxed=True), UnconfinedCommands)
