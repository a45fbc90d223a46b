"""Hand a queued run to the task queue (django-q2): once after it commits, again from the sweep."""

from __future__ import annotations

import logging

from django.db.models import F
from django.utils import timezone

from runs.models import Run, RunTask
from tenancy import stores
from sessions.services import session_set_task_refs

logger = logging.getLogger(__name__)

#: The django-q2 function that executes a queued run.
EXECUTE_TASK = "runs.tasks.execute_run"


def run_dispatch(*, org: str, run_id: str) -> str | None:
    """Enqueue the django-q2 task executing queued run `run_id` of `org`; return its task id.

    Safe to call again for the same run (the lease and the queued→running update make
    duplicates no-ops). The task id becomes the session's `taskWorkflowId`. Returns None,
    leaving the run for the sweep, when the broker refuses the task.
    """
    from django_q.tasks import async_task

    try:
        task_id = async_task(EXECUTE_TASK, org, run_id, task_name=run_id, group="agents.run")
    except Exception:  # the broker is down: the sweep retries
        logger.exception("could not enqueue run %s of %s", run_id, org)
        return None
    with stores.org_context(org):
        RunTask.objects.filter(run_id=run_id).update(task_id=task_id, enqueued_at=timezone.now(), enqueues=F("enqueues") + 1)
        session_id = Run.objects.filter(pk=run_id).values_list("session_id", flat=True).first()
        if session_id:
            try:
                session_set_task_refs(session_id=session_id, task_workflow_id=task_id, task_run_id=run_id)
            except Exception:
                logger.warning("run %s: session %s not marked task-backed", run_id, session_id, exc_info=True)
    return task_id
