"""Settle a routed run: record what the machine did, close its session, debit it like any other.

The run path's rules (DESIGN §4; reference §3.2) apply to a run executed on a machine: the run
row gets its status, output or error, model, tokens, tool calls and duration; its session gets
the one `log` summary event and ends `done`/`error`; only an `ok` run is debited, once per run
id, for the model that answered. Settling is idempotent: only a run still `running` moves.
Org context required.
"""

from __future__ import annotations

import logging

from django.db import router, transaction
from django.utils import timezone
from opentelemetry import trace

from agents import tracing
from agents.models import Run
from agents.run_session import clip
from agents_site.vocabulary import EventKind, RunStatus, SessionStatus
from billing.meter import run_charge, run_fee_cents
from tenancy import stores

logger = logging.getLogger(__name__)


def routed_run_settle(*, run_id: str, result: dict, target_id: str = "") -> Run | None:
    """Record routed run `run_id` finished with `result`; return the run, or None if already settled.

    `result` is a clamped report (`targets.sanitize.clean_report`): `{status, output, error,
    model, promptTokens, completionTokens, toolCalls, durationMs, …}`. The debit of an `ok` run
    is `CLOUD_AGENT_FEE_CENTS`, attributed to the reported model and the run's actor.
    """
    ok = result.get("status") == RunStatus.OK
    now = timezone.now()
    alias = router.db_for_write(Run)
    with transaction.atomic(using=alias):
        run = Run.objects.select_for_update().filter(pk=run_id, status=RunStatus.RUNNING).first()
        if run is None:
            return None
        run.status = RunStatus.OK if ok else RunStatus.ERROR
        run.output = (result.get("output") or "") if ok else ""
        run.error = "" if ok else (result.get("error") or "the run failed on the machine")
        run.model = result.get("model") or run.model
        run.prompt_tokens = result.get("promptTokens")
        run.completion_tokens = result.get("completionTokens")
        run.tool_calls = result.get("toolCalls") or 0
        run.attempts = max(run.attempts, 1) if result.get("model") else run.attempts
        elapsed = int((now - (run.started_at or run.created_at)).total_seconds() * 1000)
        run.duration_ms = int(result.get("durationMs") or 0) or elapsed
        run.finished_at = now
        run.save()
        org_slug = stores.current_org()
        # Once the record is committed (with the caller's transaction, if any): session, span, debit.
        transaction.on_commit(lambda: _after(run, org_slug=org_slug, target_id=target_id), using=alias, robust=True)
    return run


def _after(run: Run, *, org_slug: str, target_id: str) -> None:
    _close_session(run)
    _trace(run, org_slug=org_slug, target_id=target_id)
    fee = run_fee_cents()
    if run.status == RunStatus.OK and fee:
        run_charge(org_slug=org_slug, run_id=run.id, cents=fee, model=run.model, actor=run.actor, request_id=run.request_id)


def _close_session(run: Run) -> None:
    """Append the run summary and end the session; best effort (the run is recorded already)."""
    if not run.session_id:
        return
    from sessions.services import session_append_event, session_update

    summary = {"runId": run.id, "status": run.status, "model": run.model, "durationMs": run.duration_ms, "error": clip(run.error, 2048)}
    try:
        session_append_event(session_id=run.session_id, kind=str(EventKind.LOG), payload=summary, actor=run.actor)
    except Exception:
        logger.warning("routed run %s: summary event not recorded", run.id, exc_info=True)
    try:
        status = SessionStatus.DONE if run.status == RunStatus.OK else SessionStatus.ERROR
        session_update(session_id=run.session_id, status=str(status))
    except Exception:
        logger.warning("routed run %s: session %s not closed", run.id, run.session_id, exc_info=True)


def _trace(run: Run, *, org_slug: str, target_id: str) -> None:
    attributes = {
        tracing.ATTR_RUN_ID: run.id,
        tracing.ATTR_ORG: org_slug or "",
        tracing.ATTR_AGENT: run.agent_name,
        tracing.ATTR_ACTOR: run.actor,
        tracing.ATTR_STATUS: run.status,
        tracing.ATTR_DURATION_MS: run.duration_ms,
        tracing.ATTR_RESPONSE_MODEL: run.model,
        tracing.ATTR_TOOL_CALLS: run.tool_calls,
        "agents.target_id": target_id,
    }
    with tracing.tracer().start_as_current_span(tracing.SPAN_RUN, attributes=attributes) as span:
        if run.status != RunStatus.OK:
            span.set_status(trace.Status(trace.StatusCode.ERROR, run.error[:200]))
