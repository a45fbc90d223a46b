"""toolkit.stopping: the run's stop signal wakes what the run waits on (issue 25)."""

from __future__ import annotations

import asyncio
import socket
import threading

import httpcore2
import pytest

from toolkit.stopping import StopSignal, WatchedBackend, run_stoppable, watching


def test_a_signal_fires_its_callbacks_once_and_late_callbacks_at_once():
    signal = StopSignal()
    heard: list[str] = []
    undo = signal.on_stop(lambda: heard.append("early"))
    forgotten = signal.on_stop(lambda: heard.append("forgotten"))
    forgotten()
    assert signal.set({"command": "stop", "seq": 3}) is True
    assert signal.set({"command": "stop", "seq": 4}) is False  # the first stop wins
    signal.on_stop(lambda: heard.append("late"))
    undo()
    assert heard == ["early", "late"] and signal.command == {"command": "stop", "seq": 3} and signal.is_set()


def test_a_child_signal_is_set_with_its_parent():
    parent = StopSignal()
    child = parent.child()
    assert not child.is_set()
    parent.set({"command": "stop", "seq": 1})
    assert child.is_set() and child.command["parent"] is True


def test_a_watched_read_blocked_in_another_thread_is_woken_by_the_stop():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    backend = WatchedBackend(httpcore2.SyncBackend())
    stream = backend.connect_tcp("127.0.0.1", port)
    peer, _ = listener.accept()  # it never writes: the read blocks until the stop
    signal = StopSignal()
    outcome: dict = {}

    def read():
        with watching(signal):
            try:
                outcome["data"] = stream.read(1024, timeout=60)
            except httpcore2.ReadError as exc:
                outcome["error"] = exc

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(0.3)
    assert reader.is_alive()  # blocked on the socket
    signal.set()
    reader.join(10)
    assert not reader.is_alive() and outcome.get("data", b"") == b""  # woken: end of stream (or an error), no data
    with watching(signal), pytest.raises(httpcore2.ReadError):  # once stopped, no read starts
        stream.read(1024, timeout=1)
    peer.close()
    listener.close()


def test_an_unwatched_stream_reads_as_before():
    listener = socket.create_server(("127.0.0.1", 0))
    stream = WatchedBackend(httpcore2.SyncBackend()).connect_tcp("127.0.0.1", listener.getsockname()[1])
    peer, _ = listener.accept()
    peer.sendall(b"hello")
    assert stream.read(1024, timeout=5) == b"hello"
    stream.close()
    peer.close()
    listener.close()


def test_run_stoppable_cancels_the_coroutine_when_the_signal_is_set():
    signal = StopSignal()
    started = threading.Event()

    async def slow():
        started.set()
        await asyncio.sleep(60)  # the work the stop must cancel, not a wait

    threading.Thread(target=lambda: (started.wait(10), signal.set())).start()
    with pytest.raises(asyncio.CancelledError):
        run_stoppable(slow, signal)


def test_run_stoppable_returns_the_value_without_a_stop():
    async def quick():
        return 42

    assert run_stoppable(quick, StopSignal()) == 42 and run_stoppable(quick, None) == 42
