"""The seam between a decided slot and the one run path.

`fire` accepts the slot's run through the run lifecycle (`run_submit`, kind `scheduled`: gated,
recorded `queued` with its session, in the scheduler's transaction so the slot row and its run
commit together) and hands it to the task queue once that transaction commits; a django-q2
worker then executes it like every other queued run, with no input and the actor
`scheduler:<org>/<agent>`. A run the gate refuses is recorded as a failed run ("not started:
…"), so the scheduler's backoff counts it.
"""

from __future__ import annotations

from datetime import datetime

from runs.background import run_submit
from agents.models import Agent
from runs.models import Run
from agents_site.vocabulary import RunKind
from agents_site.wire import rfc3339


def fire(*, agent: Agent, slot_at: datetime, actor: str) -> Run:
    """Queue the scheduled run of `agent` for slot `slot_at` (UTC); return the queued run.

    Org context required; called inside the scheduler's transaction. Raises nothing the
    scheduler must handle: a queue that refuses the task leaves the run queued for the sweep
    to hand over again.
    """
    run, _ = run_submit(agent=agent, input="", actor=actor, kind=RunKind.SCHEDULED, title=f"scheduled run {rfc3339(slot_at)}")
    return run
