"""What the runs app registers with the apps below it (each registry is listed in `server/registries.py`),
and its hook on django-q2's worker start.

Imported once, from `RunsConfig.ready()`: its imports reach models, which load after `apps.py`.
"""

import logging

from django_q.conf import Conf
from django_q.signals import post_spawn
from django_q.tasks import async_task

from runs.approvals import approval_guard, pending_views, waiting_command
from runs.background import task_command
from runs.shutdown import install_worker_handler
from sessions.hooks import SessionObserver, register_session_observer

logger = logging.getLogger(__name__)


def _on_worker_spawn(sender, proc_name=None, **kwargs) -> None:
    """Prepare a django-q2 worker process that just started (in that process).

    It answers the cluster's stop signal gracefully (`runs.shutdown`), and a recovery sweep
    is queued: a cluster restarted after a crash then finishes the runs its dead workers left
    `running` within seconds, instead of waiting for the next minute's sweep.

    Not in django-q2's sync mode (`Q_CLUSTER["sync"]`; the identity tests' `sync_tasks`): there
    each task runs inline through django-q2's worker function, which sends `post_spawn` per task
    although no process was spawned. The recovery task queued here then ran inline as well, sent
    `post_spawn` again and queued another: every task recursed ~150 deep until a RecursionError
    (logged and swallowed), 7-25 s a task, and a stop handler was installed in the caller's process.
    """
    if Conf.SYNC:
        return
    install_worker_handler()
    _recover_on_spawn(sender, proc_name=proc_name)


def _recover_on_spawn(sender, proc_name=None, **kwargs) -> None:
    """Queue a recovery sweep when a django-q2 worker process starts.

    A cluster restarted after a crash then finishes the runs its dead workers left `running`
    within seconds, instead of waiting for the next minute's sweep.
    """
    try:
        async_task("runs.tasks.recover_runs", task_name=f"recover-on-spawn-{proc_name or ''}", group="agents.recover")
    except Exception:
        logger.warning("could not queue the start-up recovery sweep", exc_info=True)


class RunSessions(SessionObserver):
    """How the run machinery hears a session's commands and read (`sessions.hooks.SessionObserver`)."""

    def guard_command(self, *, session, command: str) -> None:
        approval_guard(session=session, command=command)  # resume while an approval is pending → 409

    def take_command(self, *, session, command: str, message: str | None) -> bool:
        # A queued run's task takes it; a stop ends a run waiting for approval at once.
        return (task_command(session=session, command=command, message=message)
                or waiting_command(session=session, command=command, message=message))

    def pending_approvals(self, session_id: str) -> list[dict]:
        return pending_views(session_id)  # GET …/sessions/{id} shows what its run waits on


def wire() -> None:
    """Connect the worker-start hook and register the run machinery's steering code in sessions."""
    post_spawn.connect(_on_worker_spawn, dispatch_uid="agents.recover_on_spawn")
    register_session_observer(RunSessions())
