"""The runs app's hook on django-q2's worker start (`runs.wiring`)."""

from __future__ import annotations

import signal

import pytest
from django_q.conf import Conf
from django_q.tasks import async_task

from runs import tasks
from runs.shutdown import STOP_SIGNAL, _on_stop
from tests.support.task_queue import TaskQueue, task_queue  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def test_a_task_run_inline_in_sync_mode_queues_no_recovery_sweep_and_installs_no_stop_handler(monkeypatch):
    """In sync mode django-q2 sends `post_spawn` for every inline task; no worker was spawned, so
    nothing is recovered (it recursed: each inline recovery sent `post_spawn` again)."""
    sweeps = []
    monkeypatch.setattr(tasks, "recover_runs", lambda *a, **kw: sweeps.append(a) or {})
    monkeypatch.setattr(Conf, "SYNC", True)
    handler = signal.getsignal(STOP_SIGNAL)

    async_task("runs.tasks.recover_runs", "asked-for")

    assert sweeps == [("asked-for",)]  # the task itself ran once, inline; no sweep on a "spawn"
    assert signal.getsignal(STOP_SIGNAL) is handler


def test_a_spawned_worker_queues_one_recovery_sweep(task_queue):  # noqa: F811
    from django_q.signals import post_spawn

    before = TaskQueue().ids("runs.tasks.recover_runs")
    handler = signal.signal(STOP_SIGNAL, signal.SIG_DFL)
    try:
        post_spawn.send(sender="django_q", proc_name="Process-1:1")
        assert len(TaskQueue().ids("runs.tasks.recover_runs")) == len(before) + 1
        assert signal.getsignal(STOP_SIGNAL) is _on_stop  # the worker answers the cluster's stop signal
    finally:
        signal.signal(STOP_SIGNAL, handler)
