"""The one run path: `run_execute` (spec 003 POST /v1/agents/{ref}/run; reference §3).

HTTP calls it now; cron, chat, routed and coding runs call it later. Order inside: input ≤
128 KiB (400) → idempotency replay (409s) → inference configured (503) → balance gate on the
agent's org (402 / 503; nothing executed, nothing recorded) → record the run `running` and open
its session → execute (retries, failover, tools, steering) → record the outcome → debit a
successful run once, for the model that answered. Org context required throughout.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.db import router, transaction
from django.utils import timezone
from opentelemetry import trace

from agents import tracing
from agents.execution.loop import Outcome, RunLoop
from agents.idempotency import clean_key, replay, request_hash, reserve
from agents.ids import mint_id
from agents.inference import inference_configured
from agents.models import Agent, Run
from agents.run_session import RunSession, clip
from agents_site.errors import ApiError, Conflict, InvalidRequest, NotFound, ServiceUnavailable
from agents_site.vocabulary import ErrorCode, EventKind, RunStatus, SessionStatus
from billing.meter import balance_authorize, run_charge, run_fee_cents
from tenancy import stores

logger = logging.getLogger(__name__)

MAX_INPUT_BYTES = 128 * 1024
# A run row left `running` longer than this (a crashed process) no longer holds a fee.
HOLD_WINDOW = timedelta(hours=2)


class InferenceUnavailable(ServiceUnavailable):
    """503: no inference gateway is configured (`INFERENCE_BASE_URL` unset)."""

    code = ErrorCode.INFERENCE_UNAVAILABLE
    default_message = "inference is not configured on this deployment"


class RunNotQueued(Conflict):
    """409: a worker asked to execute a run that is not (or no longer) queued."""

    code = ErrorCode.RUN_NOT_QUEUED
    default_message = "the run is not queued"


def check_input(text: str) -> str:
    """Return `text` if it is at most 128 KiB of UTF-8; raise `InvalidRequest` "input too large"."""
    if len((text or "").encode()) > MAX_INPUT_BYTES:
        raise InvalidRequest("input too large")
    return text or ""


def run_queue(*, agent: Agent, input: str, actor: str, request_id: str = "") -> Run:
    """Record a `queued` run of `agent` for a worker to execute later with `run_execute(run_id=…)`.

    Raises `InvalidRequest` for an input over 128 KiB. Nothing is gated or executed here.
    """
    text = check_input(input)
    now = timezone.now()
    return Run.objects.create(
        id=mint_id("run"), agent=agent, agent_name=agent.name, status=RunStatus.QUEUED, model=agent.model,
        input=text, actor=actor[:300], request_id=request_id[:128], created_at=now,
    )


def runs_in_flight() -> int:
    """Return how many of the org's runs are running now (started within `HOLD_WINDOW`)."""
    return Run.objects.filter(status=RunStatus.RUNNING, started_at__gte=timezone.now() - HOLD_WINDOW).count()


def _start(*, agent: Agent, run_id: str, queued: Run | None, text: str, actor: str, request_id: str,
           key: str, digest: str, parent_run_id: str, depth: int, authorize) -> tuple[Run, int]:
    """Gate and record the run `running` in one org-store transaction; return `(run, fee)`.

    `authorize()` (the balance gate, counting runs in flight) runs inside the transaction that
    inserts the `running` row: on SQLite the transaction is `BEGIN IMMEDIATE`, so two runs of
    one org cannot both pass the gate on the same last fee. Binds the idempotency key in the
    same transaction; returns the key's earlier run instead (its `replayed` set, fee 0) when a
    concurrent request bound it first. Raises the gate's `ApiError` (nothing written).
    """
    now = timezone.now()
    with transaction.atomic(using=router.db_for_write(Run)):
        if key:
            earlier = reserve(key=key, digest=digest, run_id=run_id)
            if earlier is not None:
                earlier.replayed = True
                return earlier, 0
        fee = authorize()
        if queued is not None:
            if not Run.objects.filter(pk=queued.pk, status=RunStatus.QUEUED).update(status=RunStatus.RUNNING, started_at=now):
                raise RunNotQueued()
            queued.refresh_from_db()
            run = queued
        else:
            run = Run.objects.create(
                id=run_id, agent=agent, agent_name=agent.name, status=RunStatus.RUNNING, model=agent.model,
                input=text, actor=actor[:300], request_id=request_id[:128], parent_run_id=parent_run_id,
                depth=depth, created_at=now, started_at=now,
            )
    run.replayed = False
    return run, fee


def _record(run: Run, outcome: Outcome, started: float, span) -> None:
    run.status = outcome.status
    run.output = outcome.output if outcome.status == RunStatus.OK else ""
    run.error = outcome.error if outcome.status != RunStatus.OK else ""
    run.model = outcome.model
    run.attempts = outcome.attempts
    run.prompt_tokens = outcome.prompt_tokens
    run.completion_tokens = outcome.completion_tokens
    run.tool_calls = outcome.tool_calls
    run.duration_ms = int((time.perf_counter() - started) * 1000)
    run.finished_at = timezone.now()
    run.trace_id = tracing.trace_id_hex(span)
    try:
        run.save()
    except Exception:  # the execution happened; a failed write must not turn it into a 500
        logger.exception("run %s executed (%s) but could not be recorded", run.id, run.status)
    attributes = {
        tracing.ATTR_STATUS: run.status,
        tracing.ATTR_DURATION_MS: run.duration_ms,
        tracing.ATTR_RESPONSE_MODEL: run.model,
        tracing.ATTR_ATTEMPTS: run.attempts,
        tracing.ATTR_TOOL_CALLS: run.tool_calls,
    }
    if run.prompt_tokens is not None:
        attributes[tracing.ATTR_INPUT_TOKENS] = run.prompt_tokens
    if run.completion_tokens is not None:
        attributes[tracing.ATTR_OUTPUT_TOKENS] = run.completion_tokens
    span.set_attributes(attributes)
    if run.status != RunStatus.OK:
        span.set_status(trace.Status(trace.StatusCode.ERROR, run.error[:200]))


def _fail_queued(run: Run, error: ApiError) -> None:
    Run.objects.filter(pk=run.pk, status=RunStatus.QUEUED).update(
        status=RunStatus.ERROR, error=f"not started: {error.message}", finished_at=timezone.now()
    )


def run_execute(
    *,
    agent: Agent,
    input: str | None = None,
    actor: str,
    request_id: str = "",
    idempotency_key: str = "",
    run_id: str | None = None,
    parent_session_id: str = "",
    parent_run_id: str = "",
    depth: int = 0,
    deadline: float | None = None,
) -> Run:
    """Execute one run of `agent` on `input` for `actor`; return the recorded run.

    In: the agent (of the current org), the input (≤ 128 KiB; ignored when `run_id` names a
    queued run, whose input is used), the billing actor (`"<org>/<subject>"`, required), the
    caller's request id, an optional idempotency key, `run_id` of a `queued` run a worker
    executes now, and for a run called as a tool: the parent's session and run ids, its
    nesting `depth` and a monotonic `deadline`.
    Out: the `Run`, status `ok` (output) or `error` (error says why); `run.replayed` is True
    when it is an earlier run answered again for the same idempotency key.
    Raises (nothing executed, nothing recorded): `InvalidRequest` (400 input too large / bad
    key), `IdempotencyMismatch` / `IdempotencyInProgress` (409), `InferenceUnavailable` (503),
    `Forbidden` (403, no actor), `InsufficientBalance` (402), `BalanceUnavailable` (503),
    `NotFound` / `RunNotQueued` for a bad `run_id`.
    """
    org_slug = stores.current_org()
    if org_slug is None:
        raise stores.NoOrgSelected("run_execute needs the agent's org context")
    queued = None
    if run_id:
        queued = Run.objects.filter(pk=run_id, agent=agent).first()
        if queued is None:
            raise NotFound("run not found")
        if queued.status != RunStatus.QUEUED:
            raise RunNotQueued()
        input = queued.input
        actor = actor or queued.actor
        request_id = request_id or queued.request_id
    text = check_input(input or "")
    key = clean_key(idempotency_key)
    digest = request_hash(agent_id=agent.id, input=text) if key else ""
    if key and queued is None:
        earlier = replay(key=key, digest=digest)
        if earlier is not None:
            earlier.replayed = True
            return earlier
    if not inference_configured():
        raise InferenceUnavailable()
    new_id = queued.id if queued else mint_id("run")
    attributes = {
        tracing.ATTR_RUN_ID: new_id,
        tracing.ATTR_ORG: org_slug,
        tracing.ATTR_AGENT: agent.name,
        tracing.ATTR_ACTOR: actor or "",
        tracing.ATTR_DEPTH: depth,
        tracing.ATTR_REQUEST_MODEL: agent.model,
    }
    with tracing.tracer().start_as_current_span(tracing.SPAN_RUN, attributes=attributes, record_exception=False) as span:
        def authorize() -> int:
            held = runs_in_flight() if run_fee_cents() else 0
            return balance_authorize(org_slug=org_slug, actor=actor, held_runs=held)

        try:
            run, fee = _start(agent=agent, run_id=new_id, queued=queued, text=text, actor=actor, request_id=request_id,
                              key=key, digest=digest, parent_run_id=parent_run_id, depth=depth, authorize=authorize)
        except ApiError as exc:
            span.set_status(trace.Status(trace.StatusCode.ERROR, exc.message))
            if queued is not None:
                _fail_queued(queued, exc)
            raise
        if run.replayed:
            return run
        started = time.perf_counter()
        if queued is not None and queued.session_id:  # a background/scheduled run: its session exists
            session = RunSession.attach(session_id=queued.session_id, actor=run.actor)
        else:
            session = RunSession.open(agent_name=agent.name, actor=run.actor, title=text, parent_session_id=parent_session_id)
        if session.session_id and session.session_id != run.session_id:
            run.session_id = session.session_id
            Run.objects.filter(pk=run.pk).update(session_id=session.session_id)
        outcome = RunLoop(agent=agent, text=text, run=run, session=session, org_slug=org_slug, deadline=deadline).execute()
        _record(run, outcome, started, span)
        session.append(
            EventKind.LOG,
            {"runId": run.id, "status": run.status, "model": run.model, "durationMs": run.duration_ms, "error": clip(run.error, 2048)},
        )
        session.close(status=SessionStatus.DONE if run.status == RunStatus.OK else SessionStatus.ERROR)
        if run.status == RunStatus.OK and fee:
            run_charge(org_slug=org_slug, run_id=run.id, cents=fee, model=run.model, actor=run.actor, request_id=run.request_id)
    return run
