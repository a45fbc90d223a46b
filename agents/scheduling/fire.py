"""The seam between a decided slot and the one run path.

`fire` records a queued run for the slot (in the scheduler's transaction, so the slot row and
its run commit together) and hands it to the task queue once that transaction commits; a
django-q2 worker then executes it through the same run path as every other run (gate,
record, session, debit), with no input and the actor `scheduler:<org>/<agent>`.
"""

from __future__ import annotations

from datetime import datetime

from agents.background import run_enqueue
from agents.models import Agent, Run
from agents_site.wire import rfc3339


def fire(*, agent: Agent, slot_at: datetime, actor: str) -> Run:
    """Queue the scheduled run of `agent` for slot `slot_at` (UTC); return the queued run.

    Org context required; called inside the scheduler's transaction. Raises nothing the
    scheduler must handle: a queue that refuses the task leaves the run queued for the sweep
    to hand over again.
    """
    return run_enqueue(agent=agent, input="", actor=actor, title=f"scheduled run {rfc3339(slot_at)}")
