"""The one run lifecycle: `run_start` / `run_starting` accept a run, `run_finish` / `run_finishing` end it.

Every kind of run — sync, background, scheduled, routed, agent-as-tool, chat round,
OpenAI-compatible call, coding run (`RunKind`) — is started from a `RunRequest` (a value: what
varies per call) under its kind's `RunPolicy` (`runs.policies`: its fee from billing,
whether it needs inference, whether a replayed key answers a run in flight, how a refusal
answers), registered by the app that owns the kind, and finished by `run_finish`. Nothing here
takes a callable or calls back into the app that started the run: a caller's writes that must
commit with the run are the body of `with run_starting(request) as run:`, and those that must
commit with the finish the body of `with run_finishing(...) as run:`. Between the two,
`run_mark_running` moves a queued run to `running` when a worker takes it, and a run whose model
calls a tool its agent's approval rules name is suspended `waiting` (`run_mark_waiting`) until a
person answers (`runs.approvals`; issue 28) — still holding its fee — then resumed
(`run_mark_resumed`) or finished here. These are a run's only status writes: each is one
conditional UPDATE in `runs.queries`, and no other module writes a run's status
(`tests/runs/test_status_writes.py`).

`run_starting` (spec 003 POST /v1/agents/{ref}/run; DESIGN §4), in order: org context → the
kind's policy → agent executable here (409 `agent_external`) → input ≤ 128 KiB (400) → no
credential in the input (422 `secret_in_transcript`) → `Idempotency-Key` replay (409s) →
inference configured (503, unless the policy or request says no model is called here) → then
ONE serialised org-store transaction: the key bound, the kind's in-flight limit, the balance gate (402
`insufficient_balance` / 503 `balance_unavailable`: balance − the fees runs in flight hold ≥
this run's fee), the run row (`queued` or `running`, its `kind` and the `fee_cents` it holds,
inserted once with the id of its session, opened just before it), and the caller's own writes
(the `with` body: an offer, a task record). Nothing is written when any check refuses.

`run_finishing` records the outcome with one conditional UPDATE (two finishers never both win)
and, in the same transaction, the caller's writes, the session's summary `log` event and the
session's end `done`/`error`; once that commits it sets the `agent.run` span's attributes and
debits an `ok` run once — the fee it held, for the model that answered. It is the only code that
closes a run's session or debits a run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from opentelemetry.trace import Span

from runs import hooks, queries, tracing
from runs.idempotency import clean_key, replay, request_hash, reserve
from agents_site.ids import mint_id
from runs.models import Run
from runs.policies import RunPolicy, UnknownRunKind, run_policy
from runs.request import RunRequest
from runs.run_session import RunSession, clip, session_title
from runs.selectors import runs_in_flight
from agents_site.errors import ApiError, Conflict, InvalidRequest, ServiceUnavailable
from agents_site.vocabulary import AgentHosting, ChatRole, ErrorCode, EventKind, FinishReason, RefusalAnswer, RunStatus, SessionStatus
from billing.meter import balance_authorize, run_charge
from sessions.selectors import stop_recorded
from sessions.services import append_checked_turns, refuse_secrets, session_create
from tenancy import stores
from sessions.control import ExecutorInbox, executor_channel_for_new_session
from sessions import services as session_services  # check_turn read at call time: tests inject store faults there

logger = logging.getLogger(__name__)

#: An `agents.models.Agent` (its id, name, model, hosting): runs never imports the agents app.
Agent = object

MAX_INPUT_BYTES = 128 * 1024
SUMMARY_ERROR_BYTES = 2048

_QUEUED = frozenset({RunStatus.QUEUED})
_RUNNING = frozenset({RunStatus.RUNNING})
_WAITING = frozenset({RunStatus.WAITING})


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


def run_start(request: RunRequest) -> Run:
    """Accept the run `request` asks for: check, gate and record it with its session; return the run.

    The plain form of `run_starting` for a caller with no writes of its own to commit with the
    run: the same checks, order, errors and result (see there).
    """
    with run_starting(request) as run:
        return run


@contextmanager
def run_starting(request: RunRequest) -> Iterator[Run]:
    """Check, gate and record the run `request` asks for; yield it inside its transaction.

    `with run_starting(request) as run:` — the body is the caller's own writes that must commit
    atomically with the run (a routed offer, a queued run's task row, a chat round's
    conversation lock and turn, a coding run's record), in the same serialised org-store
    transaction. Write only when `run.started_here` is True: it is False for a replayed key
    (`run.replayed`, the earlier run) and for a refusal the kind records (below), and nothing
    of the caller's belongs with those. An exception in the body rolls the whole start back —
    no run, no session, no key, no fee held — lets go of the executor inbox registered for it,
    and propagates.

    In order: org context → the kind's `RunPolicy` (`UnknownRunKind` when none is registered)
    → agent executable here (409 `agent_external`) → input ≤ 128 KiB (400) → no credential
    in the input (422 `secret_in_transcript`) → `Idempotency-Key` replay (409s; answered even
    for a run in flight when `policy.answers_in_flight`) → inference configured when
    `policy.infers_here` (503) → one serialised transaction: the key bound, the kind's
    in-flight limit (`policy.in_flight_limit`: its error, e.g. 429 `coding_busy`), the balance
    gate for the policy's fee (billing's; 402 / 503), the session opened, the run row inserted, the
    run-started handlers, then the body. A caller with a refusal of its own that must come
    after the key replay (a routed run's dispatch gate) asks `run_replay(request)` first.

    Out: the `Run` (`run.replayed`, `run.started_here`; `run.opened_here` and
    `run.executor_inbox` with `request.executor_here`: the session was opened with this
    process's executor channel and the input as its first `message` turn, the inbox registered
    before the session committed).
    Raises, with nothing written: `NoOrgSelected`, `UnknownRunKind`, `AgentExternal` (409),
    `InvalidRequest` (400), `SecretInTranscript` (422), `IdempotencyMismatch` /
    `IdempotencyInProgress` (409), `InferenceUnavailable` (503), the kind's in-flight limit
    error (429 `coding_busy`), `Forbidden` (403, no actor), `InsufficientBalance` (402), `BalanceUnavailable` (503) — except that a kind whose policy
    answers refusals with `RefusalAnswer.RECORD` (scheduled runs) gets the 402/503 recorded as
    a finished `error` run "not started: …" (nothing held, nothing billed) and yielded instead —
    and whatever the body raises.
    """
    policy, admitted, earlier = _admit(request)
    if earlier is not None:
        yield earlier
        return
    refusal: ApiError | None = None
    run = _new_row(run_id=mint_id("run"), request=request, name=admitted.name, text=admitted.text,
                   status=RunStatus.QUEUED if request.queued else RunStatus.RUNNING, fee=policy.fee_cents(request))
    executor_here = request.executor_here and not request.queued
    entered = False
    try:
        if policy.infers_here(request) and not hooks.inference_configured():
            raise InferenceUnavailable()
        with stores.org_atomic(serialize=True):
            accepted = _record(run, policy=policy, request=request, admitted=admitted, executor_here=executor_here)
            entered = True
            yield accepted
    except BaseException as exc:
        _let_go(getattr(run, "executor_inbox", None))  # nothing was committed: no command can name it
        if entered or policy.refusals != RefusalAnswer.RECORD or not isinstance(exc, ApiError) or not _is_refusal(exc):
            raise
        refusal = exc
    if refusal is not None:
        yield _record_refused(request=request, name=admitted.name, text=admitted.text, error=refusal)


def run_replay(request: RunRequest) -> Run | None:
    """Return the earlier run `request`'s `Idempotency-Key` answers (`run.replayed` True), or None.

    The checks `run_starting` makes before its replay, then the replay (nothing written):
    `UnknownRunKind`, `AgentExternal` (409), `InvalidRequest` (400), `SecretInTranscript`
    (422), `IdempotencyMismatch` / `IdempotencyInProgress` (409). For a caller whose own
    refusal must come after the replay and before the run is recorded (a routed run's dispatch
    gate: a replayed key is answered even when the machine has gone). None without a key.
    """
    return _admit(request)[2]


@dataclass(frozen=True)
class _Admitted:
    """What the checks before the transaction established: the clean text, name, key and digest."""

    text: str
    name: str
    key: str
    digest: str
    in_flight_ok: bool


def _admit(request: RunRequest) -> tuple[RunPolicy, _Admitted, Run | None]:
    """Check `request` up to its key's replay; return its policy, what was admitted and the replayed run (or None)."""
    if stores.current_org() is None:
        raise stores.NoOrgSelected("run_start needs the org context")
    policy = run_policy(request.kind)
    agent = request.agent
    if agent is not None and agent.hosting == AgentHosting.EXTERNAL:
        raise AgentExternal()
    text = check_input(request.input)
    refuse_secrets(text)  # a credential is refused before anything is stored (422, findings)
    name = request.name
    key = clean_key(request.idempotency_key)
    in_flight_ok = policy.answers_in_flight(request)
    digest = request_hash(agent_id=_identity(request.kind, agent, name, request.idempotency_scope), input=text) if key else ""
    admitted = _Admitted(text=text, name=name, key=key, digest=digest, in_flight_ok=in_flight_ok)
    if key:
        earlier = replay(key=key, digest=digest, in_flight=in_flight_ok)
        if earlier is not None:
            earlier.replayed = True
            earlier.started_here = False
            return policy, admitted, earlier
    return policy, admitted, None


def _identity(kind: str, agent: Agent | None, name: str, scope: str) -> str:
    """Return what identifies a request beside its input for `Idempotency-Key` (agent id[@scope])."""
    base = agent.id if agent is not None else f"{kind}:{name}"
    return f"{base}@{scope}" if scope else base


def _is_refusal(exc: ApiError) -> bool:
    """Return True for the refusals a `RefusalAnswer.RECORD` kind records instead of raising (gate, inference)."""
    return exc.code in {ErrorCode.INSUFFICIENT_BALANCE, ErrorCode.BALANCE_UNAVAILABLE, ErrorCode.INFERENCE_UNAVAILABLE}


def _new_row(*, run_id: str, request: RunRequest, name: str, text: str, status: str, fee: int) -> Run:
    now = timezone.now()
    agent = request.agent
    return Run(
        id=run_id, kind=request.kind, agent=agent, agent_name=name[:64], status=status, fee_cents=fee,
        model=(agent.model if agent is not None else request.model) or settings.AGENTS_DEFAULT_MODEL,
        input=text, actor=request.actor[:300], request_id=request.request_id[:128], parent_run_id=request.parent_run_id,
        depth=request.depth, metadata=dict(request.metadata), created_at=now, started_at=None if status == RunStatus.QUEUED else now,
    )


def _record(run: Run, *, policy: RunPolicy, request: RunRequest, admitted: _Admitted, executor_here: bool) -> Run:
    """Bind the key, gate (the kind's in-flight limit, the balance), open the session and insert `run` in
    the caller's serialised transaction; return it (or the earlier run a key bound meanwhile answers)."""
    if admitted.key:
        earlier = reserve(key=admitted.key, digest=admitted.digest, run_id=run.id, in_flight=admitted.in_flight_ok)
        if earlier is not None:
            earlier.replayed = True
            earlier.started_here = False
            return earlier
    _check_in_flight(policy)
    fee = run.fee_cents
    balance_authorize(org_slug=stores.current_org(), actor=request.actor, fee_cents=fee, held_cents=fees_held() if fee else 0)
    # The session first, so the run row is inserted once with its session id (one write, not two).
    run.session_id = _session_open(run, title=request.title, parent_session_id=request.parent_session_id,
                                   fields=dict(request.session_fields), executor_here=executor_here)
    queries.run_insert(run, stores.current_alias())  # the run row: one plain INSERT
    hooks.run_started_handlers(run)  # e.g. the request's own webhook callback, recorded with the run
    run.replayed = False
    run.started_here = True
    run.opened_here = executor_here and bool(run.session_id)
    return run


def _check_in_flight(policy: RunPolicy) -> None:
    """Raise the kind's `InFlightLimit.error` when the org already has its maximum of runs of the kind in flight.

    Inside the start's serialised transaction (the org's gate lock: SQLite's IMMEDIATE write lock,
    PostgreSQL's advisory lock), so the count and the insert are one step: no two starts count one
    free slot.
    """
    limit = policy.in_flight_limit
    if limit is None:
        return
    maximum = limit.maximum()
    if runs_in_flight(kind=policy.kind) >= maximum:
        raise limit.error(f"the org has {maximum} {policy.kind} runs in flight; wait for one to finish")


def _record_refused(*, request: RunRequest, name: str, text: str, error: ApiError) -> Run:
    """Record a run the gate refused as a finished `error` "not started: …" (nothing held, nothing billed)."""
    run = _new_row(run_id=mint_id("run"), request=request, name=name, text=text, status=RunStatus.QUEUED, fee=0)
    with stores.org_atomic():
        run.session_id = _session_open(run, title=request.title, parent_session_id="", fields=dict(request.session_fields))
        run.save(force_insert=True)
    run_finish(run_id=run.id, outcome=Outcome.failed(f"not started: {error.message}", model=run.model))
    run.refresh_from_db()
    run.replayed = False
    run.started_here = False
    return run


def _session_open(run: Run, *, title: str | None, parent_session_id: str, fields: dict, executor_here: bool = False) -> str:
    """Open the run's `running` session in the current transaction; return its id ("" on failure).

    A queued run's session carries the run id as `taskRunId`. With `executor_here` it is opened
    with this process's executor channel and the input as its first turn (see `run_start`).
    Best-effort: a session that cannot be opened (a savepoint is rolled back) never stops the run.
    """
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
                    turn = session_services.check_turn(kind=EventKind.MESSAGE, payload=user_turn(run), actor=run.actor[:256])
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
        if not queries.run_move(run_id, to=RunStatus.RUNNING, from_statuses=_QUEUED, alias=stores.current_alias(),
                                changes={"started_at": timezone.now()}):
            raise RunNotQueued()
    return Run.objects.select_related("agent").get(pk=run_id)


def run_mark_waiting(*, run_id: str, outcome: Outcome | None = None) -> bool:
    """Suspend `running` run `run_id`: move it to `waiting`; return True when this call moved it.

    One conditional UPDATE (`runs.queries.run_move`): a run no longer `running` (a stop finished
    it, another caller suspended it) is left as it is and False is returned. A waiting run keeps
    holding its fee (`RunStatus.HOLDS_FEE`). With `outcome`, the usage so far is recorded with the
    move: its model ("" keeps the recorded one), attempts, tokens and tool calls. Runs inside the
    caller's transaction when there is one (`runs.approvals.run_wait` writes the turn's approval
    requests in the same one). Callers: the server's executor whose model called a tool needing
    approval (`run_wait`), a routed run's machine asking (`targets.approvals`), recovery putting a
    resumed run lost mid-turn back (`run_rewait`), a resumed claim whose answer never reached its
    machine (`targets.approvals.resume_released`). Org context required.
    """
    changes: dict = {}
    if outcome is not None:
        changes = {"attempts": outcome.attempts, "prompt_tokens": outcome.prompt_tokens,
                   "completion_tokens": outcome.completion_tokens, "tool_calls": outcome.tool_calls}
        if outcome.model:
            changes["model"] = outcome.model
    with stores.org_atomic():
        return queries.run_move(run_id, to=RunStatus.WAITING, from_statuses=_RUNNING, alias=stores.current_alias(), changes=changes)


def run_mark_resumed(*, run_id: str) -> bool:
    """Resume `waiting` run `run_id` (its approvals all answered): move it to `running`; return True when this call moved it.

    One conditional UPDATE: of two resumers (two deliveries of the resume task, two claims of a
    routed run's offer) one wins; a run no longer `waiting` (stopped, expired) is left as it is.
    It holds its fee throughout. Runs inside the caller's transaction when there is one (the
    resume task takes the run's lease in the same one; a routed claim its calls). Org context
    required.
    """
    with stores.org_atomic():
        return queries.run_move(run_id, to=RunStatus.RUNNING, from_statuses=_WAITING, alias=stores.current_alias())


def run_finish(
    *,
    run_id: str,
    outcome: Outcome,
    from_statuses: frozenset[str] = RunStatus.IN_FLIGHT,
    session: RunSession | None = None,
    span: Span | None = None,
    span_attributes: dict | None = None,
    summary: dict | None = None,
) -> Run | None:
    """End run `run_id` with `outcome`; return the finished run, or None if it was not in `from_statuses`.

    The plain form of `run_finishing` for a caller with no writes of its own to commit with the
    finish: the same arguments and result (see there).
    """
    with run_finishing(run_id=run_id, outcome=outcome, from_statuses=from_statuses, session=session, span=span,
                       span_attributes=span_attributes, summary=summary) as run:
        return run


@contextmanager
def run_finishing(
    *,
    run_id: str,
    outcome: Outcome,
    from_statuses: frozenset[str] = RunStatus.IN_FLIGHT,
    session: RunSession | None = None,
    span: Span | None = None,
    span_attributes: dict | None = None,
    summary: dict | None = None,
) -> Iterator[Run | None]:
    """End run `run_id` with `outcome`; yield the finished run (None if it was not in `from_statuses`).

    `with run_finishing(...) as run:` — the body is the caller's writes that must commit with
    the finish (a conversation round's reply and the release of its conversation). It runs
    only when `run` is not None (this call finished the run; write nothing otherwise), in a
    savepoint of the finish's transaction; what it raises is logged, rolled back to that
    savepoint and never undoes the finish (the exception does not propagate).

    One conditional UPDATE records status, output or error, model, attempts, tokens, tool
    calls, duration (the outcome's, else since the run started; 0 if it never started) and
    `finished_at`; a run already finished (or not in `from_statuses`) is left alone. A stop
    recorded in the session before this commits is honoured (the run ends stopped, unbilled).
    In the same transaction, after the body, the session gets the one summary `log` event and
    ends `done`/`error` (through the run's `RunSession` when the executor holds one, closing
    its inbox; `summary` adds fields to that event, e.g. a coding run's branch), and the
    run-finishing handlers (the kind's `RunPolicy.finishing`, then `runs.hooks.RunObserver.finishing`: the `run.finished`
    webhook deliveries) write, each in a savepoint of its own. Once the row commits (with the
    caller's transaction, if any): the `agent.run` span gets the outcome (`span`, else a new
    span with `span_attributes`), and an `ok` run is debited its `fee_cents` once, for the
    model that answered. Org context required.
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
    # A finish that is its own transaction and fails (its commit refused, its connection lost)
    # is recorded `error` at once by `_finish_failed`; inside a caller's transaction it cannot
    # be (that transaction is broken): the caller's failure propagates and the recovery sweep
    # ends the run. `in_body`: what the caller's `with` body raises is never the finish's fault.
    own_transaction = not transaction.get_connection(alias).in_atomic_block
    in_body = False
    try:
        with stores.org_atomic():
            run = queries.run_outcome(run_id, changes, from_statuses=from_statuses, alias=alias)
            if run is None:
                _close_inbox_only(session)
                in_body = True
                yield None
                return
            if run.status == RunStatus.OK and run.session_id:
                run = _honour_a_recorded_stop(run, alias=alias, now=now) or run
            try:
                with stores.org_atomic():
                    yield run
            except Exception:
                logger.exception("run %s: the writes committed with its finish failed", run_id)
            # The session's summary and its end commit with the outcome: one transaction, not three
            # (each session write is its own savepoint and never undoes the finish).
            _close_session(run, session=session, extra=summary)
            # Writes that must be durable exactly when the finish is: the kind's own (a routed run's offer
            # withdrawn), then the observers' (the run.finished deliveries).
            hooks.run_finishing_handlers(run, _kind_finishing(run.kind))
            transaction.on_commit(lambda: _after_finish(run, org_slug=org_slug, span=span, span_attributes=span_attributes),
                                  using=alias, robust=True)
    except Exception as exc:
        if own_transaction and not in_body:
            _finish_failed(run_id=run_id, from_statuses=from_statuses, session=session, cause=exc, at=now)
        raise


def _kind_finishing(kind: str):
    """Return the `finishing` of `kind`'s `RunPolicy` (None: it has none, or no app registered the kind)."""
    try:
        return run_policy(kind).finishing
    except UnknownRunKind:
        return None


#: The error of a run whose finish failed to commit (issue 51: recorded by the same request).
FINISH_FAILED = "the run's outcome could not be recorded"


def _finish_failed(*, run_id: str, from_statuses: frozenset[str], session: RunSession | None, cause: Exception, at) -> None:
    """Record run `run_id` `error` after its finish's transaction failed, in a transaction of its own.

    The outcome, the session's summary and end, the deliveries were all rolled back with the
    failed commit, so the run would stay in flight — holding its fee, listed `running` — until
    the recovery sweep's clock ran out. Here the run row is ended `error` (`FINISH_FAILED`,
    the cause's class named; nothing billed) and its session closed `error`; no run-finishing
    handler runs again (one of them may be what failed). Best effort: if this fails too (the
    store is gone), it is logged and the recovery sweep ends the run. Org context required.
    """
    alias = stores.current_alias()
    changes = {"status": RunStatus.ERROR, "error": f"{FINISH_FAILED} ({type(cause).__name__})", "finish_reason": FinishReason.ERROR,
               "duration_ms": None, "finished_at": at}
    try:
        with stores.org_atomic():
            run = queries.run_outcome(run_id, changes, from_statuses=from_statuses, alias=alias)
            if run is not None:
                _close_session(run, session=None)  # the session's row as stored: the failed writes are gone
    except Exception:
        logger.warning("run %s: its finish failed and recording it `error` failed too; the recovery sweep will end it", run_id,
                       exc_info=True)
        run = None
    else:
        if run is not None:
            logger.error("run %s: its finish failed (%s: %s); recorded error", run_id, type(cause).__name__, cause)
    _close_inbox_only(session)


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
