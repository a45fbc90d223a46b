import logging

from django.apps import AppConfig

logger = logging.getLogger(__name__)


def _on_worker_spawn(sender, proc_name=None, **kwargs) -> None:
    """Prepare a django-q2 worker process that just started (in that process).

    It answers the cluster's stop signal gracefully (`agents.shutdown`), and a recovery sweep
    is queued: a cluster restarted after a crash then finishes the runs its dead workers left
    `running` within seconds, instead of waiting for the next minute's sweep.
    """
    from agents.shutdown import install_worker_handler

    install_worker_handler()
    _recover_on_spawn(sender, proc_name=proc_name)


def _recover_on_spawn(sender, proc_name=None, **kwargs) -> None:
    """Queue a recovery sweep when a django-q2 worker process starts.

    A cluster restarted after a crash then finishes the runs its dead workers left `running`
    within seconds, instead of waiting for the next minute's sweep.
    """
    from django_q.tasks import async_task

    try:
        async_task("agents.tasks.recover_runs", task_name=f"recover-on-spawn-{proc_name or ''}", group="agents.recover")
    except Exception:
        logger.warning("could not queue the start-up recovery sweep", exc_info=True)


def _register_run_policies() -> None:
    """Register the rules of the kinds of run this app owns (`agents.runs.policies`).

    `run` (sync or background) and `tool` (an agent called as a tool) call this deployment's
    gateway and answer refusals with the error; `scheduled` records a refused slot as a
    finished `error` run "not started: …" (no caller is there to hear a 402).
    """
    from agents.runs.policies import RunPolicy, register_run_policy
    from agents_site.vocabulary import RefusalAnswer, RunKind

    register_run_policy(RunPolicy(kind=RunKind.RUN))
    register_run_policy(RunPolicy(kind=RunKind.TOOL))
    register_run_policy(RunPolicy(kind=RunKind.SCHEDULED, refusals=RefusalAnswer.RECORD))


class AgentsConfig(AppConfig):
    """Agent definitions and their runs (each org's own store)."""

    name = "agents"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from agents.background import task_command
        from agents.runs.approvals import approval_guard, approvals_sweep, waiting_command
        from agents.sweeps import register_sweep
        from sessions.control import register_command_guard, register_command_handler

        post_spawn.connect(_on_worker_spawn, dispatch_uid="agents.recover_on_spawn")
        _register_run_policies()
        register_command_handler(task_command)
        register_command_handler(waiting_command)  # a stop ends a run waiting for approval at once
        register_command_guard(approval_guard)  # resume while an approval is pending → 409
        register_sweep("approvalsExpired", approvals_sweep)
        from agents.runs.approvals import pending_views
        from sessions.hooks import register_pending_approvals

        register_pending_approvals(pending_views)  # GET …/sessions/{id} shows what its run waits on
