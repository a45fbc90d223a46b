"""The one run lifecycle: `run_start` accepts a run, `run_finish` ends it.

Every kind of run — sync, background, scheduled, routed, agent-as-tool, chat round,
OpenAI-compatible call, coding run (`RunKind`) — is started by `run_start` and finished by
`run_finish`; callers differ only in what they pass. Between the two, `run_mark_running`
moves a queued run to `running` when a worker takes it, and a run whose model calls a tool its
agent's approval rules name is suspended `waiting` until a person answers
(`runs.approvals`; issue 28) — still holding its fee, then resumed or finished here.

`run_start` (spec 003 POST /v1/agents/{ref}/run; DESIGN §4), in order: org context → agent
executable here (409 `agent_external`) → input ≤ 128 KiB (400) → no credential in the input
(422 `secret_in_transcript`) → `Idempotency-Key` replay
(409s) → inference configured (503, unless a machine infers) → then ONE serialised org-store
transaction: the key bound, the balance gate (402 `insufficient_balance` / 503
`balance_unavailable`: balance − the fees runs in flight hold ≥ this run's fee), the run row
(`queued` or `running`, its `kind` and the `fee_cents` it holds, inserted once with the id of
its session, opened just before it), and
the caller's own writes (`within`: an offer, a task record). Nothing is written when any check
refuses.

`run_finish` records the outcome with one conditional UPDATE (two finishers never both win)
and, in the same transaction, appends the session's summary `log` event and ends the session
`done`/`error`; once that commits it sets the `agent.run` span's attributes and debits an `ok`
run once — the fee it held, for the model that answered. It is the only code that closes a run's session or debits a run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs import hooks, queries, tracing
from runs.idempotency import clean_key, replay, request_hash, reserve
from agents_site.ids import mint_id
from runs.models import Run
from runs.run_session import RunSession, clip, session_title
from agents_site.errors import ApiError, Conflict, InvalidRequest, ServiceUnavailable
from agents_site.vocabulary import AgentHosting, ChatRole, ErrorCode, EventKind, FinishReason, RunKind, RunStatus, SessionStatus
from billing.meter import balance_authorize, fee_for_kind, run_charge
from sessions.selectors import stop_recorded
from sessions.services import refuse_secrets
from tenancy import stores

logger = logging.getLogger(__name__)

#: An `agents.models.Agent` (its id, name, model, hosting): runs never imports the agents app.
Agent = object

MAX_INPUT_BYTES = 128 * 1024
SUMMARY_ERROR_BYTES = 2048


class InferenceUnavailable(ServiceUnavailable):
    """503: no inference gateway is configured (`INFERENCE_BASE_URL` unset)."""

    code = ErrorCode.INFERENCE_UNAVAILABLE
    default_message = "inference is not configured on this deployment"


class RunNotQueued(Conflict):
    """409: a worker asked to execute a run that is not (or no longer) queued."""

    code = ErrorCode.RUN_NOT_QUEUED
    default_message = "the run is not queued"


class AgentExternal(Conflict):
    """409: the agent is an identity whose brain runs elsewhere; it is never executed here."""

    code = ErrorCode.AGENT_EXTERNAL
    default_message = "this agent runs elsewhere (hosting: external); it cannot be executed on this platform"


@dataclass
class Outcome:
    """How a run ended: status, output or error, the model that answered, usage.

    `status` is `RunStatus.OK` (with `output`) or `RunStatus.ERROR` (with `error`, one
    sentence). Tokens are summed over every completion of the run (None when the gateway
    reported none). `duration_ms` None means "measured from the run's start". `actions` are
    the tool calls executed here (`{name, args, result}` or `{name, args, error}`), `ops` the
    calls of client-executed tools handed back to the caller (`{name, args}`): neither is a
    column of the run; conversation rounds return them.
    """

    status: str = RunStatus.ERROR
    output: str = ""
    error: str = ""
    model: str = ""
    attempts: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    tool_calls: int = 0
    duration_ms: int | None = None
    finish_reason: str = ""  # FinishReason; "" → `stop` for an ok run, `error` for a failed one
    actions: list = field(default_factory=list)
    ops: list = field(default_factory=list)

    @classmethod
    def failed(cls, error: str, *, model: str = "") -> Outcome:
        """Return an `error` outcome saying `error` (no model call counted)."""
        return cls(status=RunStatus.ERROR, error=error, model=model)


def check_input(text: str | None) -> str:
    """Return `text` ("" for None) if it is at most 128 KiB of UTF-8; else raise `InvalidRequest` "input too large"."""
    if len((text or "").encode()) > MAX_INPUT_BYTES:
        raise InvalidRequest("input too large")
    return text or ""


def stop_reason(default: str, message: str | None) -> str:
    """Return the error a stopped run records: `default`, then the stop's message as its reason.

    Spec 003: a stop is recorded "with the request's message as the cancellation reason (a
    default stands in when none is given)". Example: ("stopped by acme/ann", "wrong repo") →
    "stopped by acme/ann: wrong repo"; ("stopped by acme/ann", None) → "stopped by acme/ann".
    """
    reason = (message or "").strip()
    return f"{default}: {reason}" if reason else default


def fees_held() -> int:
    """Return the cents the current org's runs in flight hold (`RunStatus.HOLDS_FEE`). Org context required.

    One plain-SQL statement (`runs.queries`): the gate of every run reads it.
    """
    return queries.fees_held(stores.current_alias())


def runs_in_flight() -> int:
    """Return how many of the current org's runs hold a fee now (queued or running)."""
    return Run.objects.filter(status__in=RunStatus.HOLDS_FEE).count()


def run_start(
    *,
    kind: str,
    agent: Agent | None,
    input: str | None,
    actor: str,
    request_id: str = "",
    idempotency_key: str = "",
    idempotency_scope: str = "",
    queued: bool = False,
    agent_name: str = "",
    model: str = "",
    needs_inference: bool = True,
    parent_session_id: str = "",
    parent_run_id: str = "",
    depth: int = 0,
    title: str | None = None,
    session_fields: dict | None = None,
    fee_cents: int | None = None,
    check: Callable[[], None] | None = None,
    within: Callable[[Run], None] | None = None,
    refused: str = "raise",
    executor_here: bool = False,
) -> Run:
    """Accept one run of `kind`: check, gate and record it with its session; return the run.

    In: the `RunKind`; the agent (None for a run no agent drives: then `agent_name` and
    `model` name it); the input (≤ 128 KiB); the billing actor `"<org>/<subject>"`; the
    caller's request id; an optional `Idempotency-Key` (with `idempotency_scope` added to the
    request's identity, e.g. the target id of a routed run); `queued=True` records the run
    `queued` for a worker (else `running` now); `needs_inference=False` when a machine infers;
    for a run called as a tool its parent's session and run ids and its `depth`; the session's
    `title` (default: the start of the input) and extra `session_fields` for `session_create`
    (`target`, `host`, `project`, `repo`…); `fee_cents` (default: the fee of `kind`);
    `check()`, the caller's own refusal after the key replay (a routed run's dispatch gate);
    `within(run)`, the caller's writes that must commit with the run (an offer, a task row).
    `refused="record"` (scheduled runs) records a run the gate or the inference check refuses
    as a finished `error` "not started: …" instead of raising. `executor_here=True` (a run the
    caller executes in this process at once, through `RunLoop`): the session is opened with
    this process's executor channel and, when the input is not blank, its first `message` turn
    (role `user`, the input) — in the same transaction, so attaching the executor writes
    nothing (`run.opened_here` is True then, and `run.executor_inbox` is the inbox, registered
    before the session committed).

    Out: the `Run` (`run.replayed` True when an earlier run of the same key is answered
    instead; its `session_id` set when the session opened). A replayed key answers a run still
    in flight only for `queued` or routed runs (answered 202); a synchronous run still running
    is 409 `idempotency_in_progress`.
    Raises, with nothing written: `NoOrgSelected`, `AgentExternal` (409), `InvalidRequest`
    (400), `SecretInTranscript` (422: the input carries a credential; findings masked), `IdempotencyMismatch` / `IdempotencyInProgress` (409), `InferenceUnavailable`
    (503), `Forbidden` (403, no actor), `InsufficientBalance` (402), `BalanceUnavailable`
    (503), and whatever `within` raises.
    """
    org_slug = stores.current_org()
    if org_slug is None:
        raise stores.NoOrgSelected("run_start needs the org context")
    if agent is not None and agent.hosting == AgentHosting.EXTERNAL:
        raise AgentExternal()
    text = check_input(input)
    refuse_secrets(text)  # a credential is refused before anything is stored (422, findings)
    name = agent.name if agent is not None else agent_name
    key = clean_key(idempotency_key)
    in_flight_ok = queued or kind == RunKind.ROUTED
    digest = request_hash(agent_id=_identity(kind, agent, name, idempotency_scope), input=text) if key else ""
    if key:
        earlier = replay(key=key, digest=digest, in_flight=in_flight_ok)
        if earlier is not None:
            earlier.replayed = True
            return earlier
    if check is not None:
        check()
    fee = fee_for_kind(kind) if fee_cents is None else max(int(fee_cents), 0)
    try:
        if needs_inference and not hooks.inference_configured():
            raise InferenceUnavailable()
        return _record(
            kind=kind, agent=agent, name=name, model=model, text=text, actor=actor, request_id=request_id, key=key,
            digest=digest, in_flight_ok=in_flight_ok, queued=queued, fee=fee, org_slug=org_slug,
            parent_session_id=parent_session_id, parent_run_id=parent_run_id, depth=depth, title=title,
            session_fields=session_fields or {}, within=within, executor_here=executor_here and not queued,
        )
    except (InferenceUnavailable, ApiError) as exc:
        if refused != "record" or not _is_refusal(exc):
            raise
        return _record_refused(kind=kind, agent=agent, name=name, model=model, text=text, actor=actor,
                               request_id=request_id, title=title, session_fields=session_fields or {}, error=exc)


def _identity(kind: str, agent: Agent | None, name: str, scope: str) -> str:
    """Return what identifies a request beside its input for `Idempotency-Key` (agent id[@scope])."""
    base = agent.id if agent is not None else f"{kind}:{name}"
    return f"{base}@{scope}" if scope else base


def _is_refusal(exc: ApiError) -> bool:
    """Return True for the refusals a scheduled run records instead of raising (gate, inference)."""
    return exc.code in {ErrorCode.INSUFFICIENT_BALANCE, ErrorCode.BALANCE_UNAVAILABLE, ErrorCode.INFERENCE_UNAVAILABLE}


def _new_row(*, run_id: str, kind: str, agent: Agent | None, name: str, model: str, text: str, actor: str,
             request_id: str, status: str, fee: int, parent_run_id: str = "", depth: int = 0) -> Run:
    now = timezone.now()
    return Run(
        id=run_id, kind=kind, agent=agent, agent_name=name[:64], status=status, fee_cents=fee,
        model=(agent.model if agent is not None else model) or settings.AGENTS_DEFAULT_MODEL,
        input=text, actor=actor[:300], request_id=request_id[:128], parent_run_id=parent_run_id, depth=depth,
        created_at=now, started_at=None if status == RunStatus.QUEUED else now,
    )


def _record(*, kind, agent, name, model, text, actor, request_id, key, digest, in_flight_ok, queued, fee, org_slug,
            parent_session_id, parent_run_id, depth, title, session_fields, within, executor_here=False) -> Run:
    """Bind the key, gate, insert the run and open its session: one serialised org-store transaction."""
    run = _new_row(run_id=mint_id("run"), kind=kind, agent=agent, name=name, model=model, text=text, actor=actor,
                   request_id=request_id, status=RunStatus.QUEUED if queued else RunStatus.RUNNING, fee=fee,
                   parent_run_id=parent_run_id, depth=depth)
    try:
        with stores.org_atomic(serialize=True):
            if key:
                earlier = reserve(key=key, digest=digest, run_id=run.id, in_flight=in_flight_ok)
                if earlier is not None:
                    earlier.replayed = True
                    return earlier
            balance_authorize(org_slug=org_slug, actor=actor, fee_cents=fee, held_cents=fees_held() if fee else 0)
            # The session first, so the run row is inserted once with its session id (one write, not two).
            run.session_id = _session_open(run, title=title, parent_session_id=parent_session_id, fields=session_fields,
                                           executor_here=executor_here)
            queries.run_insert(run, stores.current_alias())  # the run row: one plain INSERT
            hooks.run_started_handlers(run)  # e.g. the request's own webhook callback, recorded with the run
            if within is not None:
                within(run)
    except BaseException:
        _let_go(getattr(run, "executor_inbox", None))  # nothing was committed: no command can name it
        raise
    run.replayed = False
    run.opened_here = executor_here and bool(run.session_id)
    return run


def _record_refused(*, kind, agent, name, model, text, actor, request_id, title, session_fields, error: ApiError) -> Run:
    """Record a run the gate refused as a finished `error` "not started: …" (nothing held, nothing billed)."""
    run = _new_row(run_id=mint_id("run"), kind=kind, agent=agent, name=name, model=model, text=text, actor=actor,
                   request_id=request_id, status=RunStatus.QUEUED, fee=0)
    with stores.org_atomic():
        run.session_id = _session_open(run, title=title, parent_session_id="", fields=session_fields)
        run.save(force_insert=True)
    run_finish(run_id=run.id, outcome=Outcome.failed(f"not started: {error.message}", model=run.model))
    run.refresh_from_db()
    run.replayed = False
    return run


def _session_open(run: Run, *, title: str | None, parent_session_id: str, fields: dict, executor_here: bool = False) -> str:
    """Open the run's `running` session in the current transaction; return its id ("" on failure).

    A queued run's session carries the run id as `taskRunId`. With `executor_here` it is opened
    with this process's executor channel and the input as its first turn (see `run_start`).
    Best-effort: a session that cannot be opened (a savepoint is rolled back) never stops the run.
    """
    from sessions.control import ExecutorInbox, executor_channel_for_new_session
    from sessions.services import append_checked_turns, check_turn, session_create

    inbox = None
    try:
        with stores.org_atomic():
            session = session_create(
                agent=run.agent_name or "run", actor=run.actor[:256],
                title=session_title(title if title is not None else run.input), status=SessionStatus.RUNNING,
                parent_session_id=parent_session_id or None,
                task_run_id=run.id if run.status == RunStatus.QUEUED else "",
                executor_channel=executor_channel_for_new_session() if executor_here else "", **fields,
            )
            if executor_here:
                # Registered before the session commits: a command sent the moment it is visible
                # finds the executor's inbox (and is acknowledged) even before the loop starts.
                inbox = ExecutorInbox.attach(session_id=session.id)
            if executor_here and run.input.strip():
                try:  # its own savepoint (append_checked_turns): a refused turn leaves the session open
                    turn = check_turn(kind=EventKind.MESSAGE, payload=user_turn(run), actor=run.actor[:256])
                    append_checked_turns(session_id=session.id, turns=[turn])
                except Exception:
                    logger.warning("run %s: its input was not recorded on its session", run.id, exc_info=True)
        run.session_root = str(session.root_id)  # the session's flow, for the executor's live frames
        run.executor_inbox = inbox
        return str(session.id)
    except Exception:
        _let_go(inbox)
        logger.warning("run %s: session could not be opened", run.id, exc_info=True)
        return ""


def _let_go(inbox) -> None:
    """Unregister an executor inbox whose session was never committed (nothing to clear)."""
    if inbox is not None:
        inbox.close(cleared=True)


def user_turn(run: Run) -> dict:
    """Return the payload of a run's opening `message` turn: the input, as the user's (clipped to 16 KiB)."""
    return {"role": ChatRole.USER, "text": clip(run.input), "runId": run.id}


def run_mark_running(*, run_id: str) -> Run:
    """Move queued run `run_id` to `running` (a worker took it); return the run.

    One conditional UPDATE in a serialised org-store transaction, so a run is started once
    however often its task is delivered. The run has held its fee since `run_start`; the
    balance is checked once more (money can leave the account out of band, e.g. a negative
    credit), so the run starts only if the balance still covers every fee held, its own
    included. Raises `RunNotQueued` (409) when it is not queued (cancelled, taken, finished),
    `InsufficientBalance` (402) / `BalanceUnavailable` (503) when it can no longer be paid —
    the caller ends it "not started". Org context required.
    """
    with stores.org_atomic(serialize=True):
        run = Run.objects.select_related("agent").filter(pk=run_id, status=RunStatus.QUEUED).first()
        if run is None:
            raise RunNotQueued()
        if run.fee_cents:
            balance_authorize(org_slug=stores.current_org(), actor=run.actor, fee_cents=run.fee_cents,
                              held_cents=fees_held() - run.fee_cents)
        if not Run.objects.filter(pk=run_id, status=RunStatus.QUEUED).update(status=RunStatus.RUNNING, started_at=timezone.now()):
            raise RunNotQueued()
    return Run.objects.select_related("agent").get(pk=run_id)


def run_finish(
    *,
    run_id: str,
    outcome: Outcome,
    from_statuses: frozenset = RunStatus.IN_FLIGHT,
    session: RunSession | None = None,
    span=None,
    span_attributes: dict | None = None,
    summary: dict | None = None,
    within: Callable[[Run], None] | None = None,
) -> Run | None:
    """End run `run_id` with `outcome`; return the finished run, or None if it was not in `from_statuses`.

    One conditional UPDATE records status, output or error, model, attempts, tokens, tool
    calls, duration (the outcome's, else since the run started; 0 if it never started) and
    `finished_at`; a run
    already finished (or not in `from_statuses`) is left alone and None is returned. In the
    same transaction the session gets the one summary `log` event and ends `done`/`error`
    (through the run's `RunSession` when the executor holds one, closing its inbox; `summary`
    adds fields to that event, e.g. a coding run's branch). Once the row commits (with the
    caller's transaction, if any): the `agent.run` span gets the outcome (`span`, else a new
    span with `span_attributes`), and an `ok` run is debited its `fee_cents` once, for the
    model that answered.
    `within(run)`, the caller's writes that must commit with the finish (a conversation round's
    reply and the release of its conversation), runs in a savepoint of the same transaction,
    only when this call finished the run; what it raises is logged and never undoes the finish.
    The run-finishing handlers (`runs.hooks.register_run_finishing_handler`: the `run.finished`
    webhook deliveries) write in the same transaction, each in a savepoint of its own.
    Org context required.
    """
    org_slug = stores.current_org()
    now = timezone.now()
    ok = outcome.status == RunStatus.OK
    alias = stores.current_alias()
    changes = {
        "status": RunStatus.OK if ok else RunStatus.ERROR,
        "output": outcome.output,  # a failed run keeps what it wrote (a reply cut off mid-stream)
        "error": "" if ok else (outcome.error or "the run failed"),
        "model": outcome.model,  # "" keeps the model the run was recorded with
        "attempts": outcome.attempts,
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "tool_calls": outcome.tool_calls,
        "finish_reason": outcome.finish_reason or (FinishReason.STOP if ok else FinishReason.ERROR),
        "duration_ms": outcome.duration_ms,
        "finished_at": now,
    }
    if span is not None:
        changes["trace_id"] = tracing.trace_id_hex(span)
    with stores.org_atomic():
        run = queries.run_outcome(run_id, changes, from_statuses=from_statuses, alias=alias)
        if run is None:
            _close_inbox_only(session)
            return None
        if run.status == RunStatus.OK and run.session_id:
            run = _honour_a_recorded_stop(run, alias=alias, now=now) or run
        if within is not None:
            try:
                with stores.org_atomic():
                    within(run)
            except Exception:
                logger.exception("run %s: the writes committed with its finish failed", run_id)
        # The session's summary and its end commit with the outcome: one transaction, not three
        # (each session write is its own savepoint and never undoes the finish).
        _close_session(run, session=session, extra=summary)
        # Writes that must be durable exactly when the finish is (the run.finished deliveries).
        hooks.run_finishing_handlers(run)
        transaction.on_commit(lambda: _after_finish(run, org_slug=org_slug, span=span, span_attributes=span_attributes),
                              using=alias, robust=True)
    return run


def _honour_a_recorded_stop(run: Run, *, alias: str, now) -> Run | None:
    """Return run `run` re-recorded as stopped when a `stop` was recorded in its session before
    this finish commits; None when none was (issue 25: a stop converges even when the run's last
    model reply completes at the moment the stop is recorded).

    Inside `run_finish`'s transaction, after the outcome's row is written (the run row, then the
    session row: the order every finish takes): the session row is locked (PostgreSQL), so a
    stop recorded concurrently has either committed — and is honoured here — or finds the
    session ended and is refused 409. The run keeps what it wrote (`output`); it ends `error`
    "stopped by <actor>[: message]" with `finishReason` `stopped`, unbilled, as every stop does.
    """
    stop = stop_recorded(session_id=run.session_id)
    if stop is None:
        return None
    error = stop_reason(f"stopped by {stop.get('actor') or 'the control plane'}", stop.get("message"))
    changes = {"status": RunStatus.ERROR, "error": error, "finish_reason": FinishReason.STOPPED, "finished_at": now,
               "duration_ms": run.duration_ms, "model": ""}
    return queries.run_outcome(run.id, changes, from_statuses=frozenset({RunStatus.OK}), alias=alias)


def _close_inbox_only(session: RunSession | None) -> None:
    if session is not None:
        session.release()


def _after_finish(run: Run, *, org_slug: str, span, span_attributes: dict | None) -> None:
    """Span, debit and run-finished handlers (`run.finished` webhooks) of a finished run (its
    row, summary and session end are committed)."""
    _trace(run, org_slug=org_slug, span=span, extra=span_attributes)
    if run.status == RunStatus.OK and run.fee_cents:
        run_charge(org_slug=org_slug, run_id=run.id, cents=run.fee_cents, model=run.model, actor=run.actor, request_id=run.request_id)
    hooks.run_finished_handlers(run, org_slug)


def _close_session(run: Run, *, session: RunSession | None, extra: dict | None = None) -> None:
    """Append the run's summary `log` event (plus `extra` fields) and end its session (`done` for ok, else `error`)."""
    if session is None:
        if not run.session_id:
            return
        session = RunSession.bind(session_id=run.session_id, actor=run.actor)
    summary = {"runId": run.id, "status": run.status, "model": run.model, "durationMs": run.duration_ms,
               "error": clip(run.error, SUMMARY_ERROR_BYTES), **(extra or {})}
    if run.finish_reason:  # a session page tells a user's stop ("stopped") from a failure by it
        summary["finishReason"] = run.finish_reason
    session.close(status=SessionStatus.DONE if run.status == RunStatus.OK else SessionStatus.ERROR, summary=summary)


def _trace(run: Run, *, org_slug: str, span, extra: dict | None) -> None:
    """Record the outcome on `span`, or on a new `agent.run` span when the run had none here."""
    attributes = {
        tracing.ATTR_STATUS: run.status,
        tracing.ATTR_DURATION_MS: run.duration_ms,
        tracing.ATTR_RESPONSE_MODEL: run.model,
        tracing.ATTR_ATTEMPTS: run.attempts,
        tracing.ATTR_TOOL_CALLS: run.tool_calls,
        tracing.ATTR_KIND: run.kind,
    }
    if run.prompt_tokens is not None:
        attributes[tracing.ATTR_INPUT_TOKENS] = run.prompt_tokens
    if run.completion_tokens is not None:
        attributes[tracing.ATTR_OUTPUT_TOKENS] = run.completion_tokens
    if span is None:
        base = {tracing.ATTR_RUN_ID: run.id, tracing.ATTR_ORG: org_slug or "", tracing.ATTR_AGENT: run.agent_name,
                tracing.ATTR_ACTOR: run.actor, **(extra or {})}
        with tracing.tracer().start_as_current_span(tracing.SPAN_RUN, attributes=base) as own:
            _set(own, run, attributes)
        return
    _set(span, run, attributes)


def _set(span, run: Run, attributes: dict) -> None:
    span.set_attributes(attributes)
    if run.status != RunStatus.OK:
        span.set_status(tracing.error_status(run.error))


def elapsed_ms(started: float) -> int:
    """Return whole milliseconds since `started` (a `time.perf_counter()` reading)."""
    return int((time.perf_counter() - started) * 1000)
