"""The one seam between coding runs and the run lifecycle (issue 10), kept thin on purpose.

Issue 10 moves every run's start and finish into `agents/runs/lifecycle.py` (`run_start`,
`run_finish`). Until that lands, these three functions do the same jobs with the pieces main
has today, and are the only place in `coding/` that gates, records, opens or closes a run's
session, or debits. When the lifecycle lands they become calls to it.

- `coding_run_start` — balance gate counting the org's runs in flight, the `Run` row
  (`kind=coding`, `fee_cents`, `queued`) and its session (`running`, `taskRunId`), in one
  org-store transaction; the caller's `prepare(run, session_id)` writes its own rows in the
  same transaction and `on_commit` hands the run to the task queue.
- `coding_run_begin` — `queued → running` in one conditional UPDATE (exactly one worker wins).
- `coding_run_finish` — the outcome, the summary `log` event, the session closed `done`/`error`,
  and the fee debited once for an `ok` run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from agents_site.ids import mint_id
from agents.models import Agent, Run
from agents.run_session import RunSession, clip, session_title
from agents_site.vocabulary import EventKind, RunKind, RunStatus, SessionStatus
from billing.meter import balance_authorize, run_charge
from tenancy import stores

logger = logging.getLogger(__name__)


def coding_run_start(
    *,
    agent: Agent | None,
    agent_name: str,
    input: str,
    actor: str,
    request_id: str,
    fee_cents: int,
    session_fields: dict,
    prepare: Callable[[Run, str], None],
    on_commit: Callable[[Run], None],
) -> Run:
    """Gate and record a queued coding run with its session; return the run.

    `session_fields` go to `session_create` (`repo`, `project`, `target`). Raises the gate's
    errors (402 `insufficient_balance`, 503 `balance_unavailable`, 403 without an actor) and
    whatever `prepare` raises; then nothing is written. Org context required.
    """
    from sessions.services import session_create

    org = stores.current_org()
    now = timezone.now()
    with stores.org_atomic():
        if fee_cents:
            held = Run.objects.filter(status__in=RunStatus.HOLDS_FEE).aggregate(total=Sum("fee_cents"))["total"] or 0
            balance_authorize(org_slug=org, actor=actor, fee_cents=fee_cents, held_cents=held)
        run = Run.objects.create(
            id=mint_id("run"), agent=agent, agent_name=agent_name, kind=RunKind.CODING, fee_cents=fee_cents,
            status=RunStatus.QUEUED, model=(agent.model if agent else ""), input=input, actor=actor[:300],
            request_id=request_id[:128], created_at=now,
        )
        session = session_create(
            agent=agent_name, actor=actor[:256], title=session_title(input), status=SessionStatus.RUNNING,
            task_run_id=run.id, **session_fields,
        )
        run.session_id = session.id
        Run.objects.filter(pk=run.pk).update(session_id=session.id)
        prepare(run, session.id)
        transaction.on_commit(lambda: on_commit(run), using=stores.current_alias())
    return run


def coding_run_begin(*, run_id: str) -> Run | None:
    """Move queued coding run `run_id` to `running`; return it, or None when it is not queued."""
    if not Run.objects.filter(pk=run_id, kind=RunKind.CODING, status=RunStatus.QUEUED).update(
        status=RunStatus.RUNNING, started_at=timezone.now()
    ):
        return None
    return Run.objects.get(pk=run_id)


def coding_run_finish(
    *,
    run: Run,
    session: RunSession | None,
    status: str,
    output: str = "",
    error: str = "",
    model: str = "",
    attempts: int = 0,
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    tool_calls: int = 0,
    summary: dict | None = None,
) -> Run:
    """Record the outcome of running coding run `run`, close its session, debit it once if `ok`.

    A run someone else finished meanwhile (a stop before start, recovery) is left as it is.
    `summary` is merged into the final `log` event's payload. Org context required.
    """
    now = timezone.now()
    duration_ms = int((now - (run.started_at or run.created_at)).total_seconds() * 1000)
    finished = Run.objects.filter(pk=run.pk, status__in=RunStatus.IN_FLIGHT).update(
        status=status, output=output if status == RunStatus.OK else "", error=error if status != RunStatus.OK else "",
        model=model or run.model, attempts=attempts, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
        tool_calls=tool_calls, duration_ms=duration_ms, finished_at=now,
    )
    run.refresh_from_db()
    if not finished:
        return run
    session = session or (RunSession.attach(session_id=run.session_id, actor=run.actor) if run.session_id else None)
    if session is not None:
        payload = {"runId": run.id, "status": run.status, "model": run.model, "durationMs": run.duration_ms, "error": clip(run.error, 2048)}
        payload.update(summary or {})
        session.append(EventKind.LOG, payload)
        session.close(status=SessionStatus.DONE if run.status == RunStatus.OK else SessionStatus.ERROR)
    if run.status == RunStatus.OK and run.fee_cents:
        run_charge(org_slug=stores.current_org(), run_id=run.id, cents=run.fee_cents, model=run.model, actor=run.actor, request_id=run.request_id)
    return run
