"""Execute a run here, in this process: start it, run the agent loop, finish it.

Each is written once as run steps (`runs.drive`): `run_execute_opened_steps`,
`run_execute_started_steps`, `run_settle_steps` wait on the event loop under `drive_async`; the
functions without `_steps` drive them here, blocking.

`run_execute` is a synchronous run (spec 003 POST /v1/agents/{ref}/run; an agent called as a
tool): `run_start` (checks, key, gate, the `running` row and its session in one transaction)
→ the agent loop (`RunLoop`: retries, failover, tools, steering) → `run_finish` (outcome,
span, summary, session closed, debit once). `run_execute_started` executes a run that is
already `running` (a background worker's, after `run_mark_running`). Org context required.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from runs import tracing
from runs.drive import Steps, drive
from agents.execution.loop import RunListener, RunLoop
from agents.models import Agent
from runs.models import Run
from runs.run_session import RunSession
from runs.approvals import run_wait
from runs.lifecycle import Outcome, elapsed_ms, run_finish, run_start
from runs.request import RunRequest
from agents_site.errors import ApiError
from agents_site.vocabulary import RunKind, RunStatus
from tenancy import stores
from opentelemetry.trace import Span
from toolkit.stopping import StopSignal

_RUNNING = frozenset({RunStatus.RUNNING})


def run_span(*, run_id: str, agent_name: str, actor: str, model: str, depth: int = 0, kind: str = RunKind.RUN):
    """Return the `agent.run` span (a context manager) for one run executed here."""
    attributes = {
        tracing.ATTR_RUN_ID: run_id,
        tracing.ATTR_ORG: stores.current_org() or "",
        tracing.ATTR_AGENT: agent_name,
        tracing.ATTR_ACTOR: actor or "",
        tracing.ATTR_DEPTH: depth,
        tracing.ATTR_REQUEST_MODEL: model,
        tracing.ATTR_KIND: kind,
    }
    return tracing.tracer().start_as_current_span(tracing.SPAN_RUN, attributes=attributes, record_exception=False)


def run_execute(
    *,
    agent: Agent,
    input: str | None = None,
    actor: str,
    request_id: str = "",
    idempotency_key: str = "",
    kind: str = RunKind.RUN,
    parent_session_id: str = "",
    parent_run_id: str = "",
    depth: int = 0,
    deadline: float | None = None,
    listener: RunListener | None = None,
    stop: StopSignal | None = None,
) -> Run:
    """Execute one run of `agent` on `input` for `actor` now; return the recorded run.

    In: the agent (of the current org), the input (≤ 128 KiB), the billing actor
    (`"<org>/<subject>"`, required), the caller's request id, an optional idempotency key, the
    `RunKind` (`tool` for an agent called as a tool, with the parent's session and run ids, its
    nesting `depth` and a monotonic `deadline`); a `listener` hears the reply as it is written;
    `stop` is a stop signal set from outside (an agent called as a tool: its parent's child).
    Out: the `Run`, status `ok` (output) or `error` (error says why); `run.replayed` is True
    when it is an earlier run answered again for the same idempotency key.
    Raises whatever `run_start` refuses with (nothing executed, nothing recorded): 400, 403,
    402, 409 (`agent_external`, idempotency), 503. Blocks while the model writes
    (`run_execute_steps` is the same as run steps).
    """
    return drive(run_execute_steps(agent=agent, input=input, actor=actor, request_id=request_id, idempotency_key=idempotency_key,
                                   kind=kind, parent_session_id=parent_session_id, parent_run_id=parent_run_id, depth=depth,
                                   deadline=deadline, listener=listener, stop=stop))


def run_execute_steps(*, agent: Agent, input: str | None = None, actor: str, request_id: str = "", idempotency_key: str = "",
                      kind: str = RunKind.RUN, parent_session_id: str = "", parent_run_id: str = "", depth: int = 0,
                      deadline: float | None = None, listener: RunListener | None = None,
                      stop: StopSignal | None = None) -> Steps[Run]:
    """`run_execute` as run steps (`runs.drive`): what a request's event loop awaits."""
    with run_span(run_id="", agent_name=agent.name, actor=actor, model=agent.model, depth=depth, kind=kind) as span:
        try:
            run = run_start(RunRequest(kind=kind, agent=agent, input=input, actor=actor, request_id=request_id,
                                       idempotency_key=idempotency_key, parent_session_id=parent_session_id,
                                       parent_run_id=parent_run_id, depth=depth, executor_here=True))
        except ApiError as exc:
            span.set_status(tracing.error_status(exc.message))
            raise
        if run.replayed:
            return run
        span.set_attribute(tracing.ATTR_RUN_ID, run.id)
        return (yield from run_execute_started_steps(run=run, agent=agent, span=span, deadline=deadline, listener=listener, stop=stop))


def run_open(
    *,
    agent: Agent,
    input: str | None = None,
    actor: str,
    request_id: str = "",
    idempotency_key: str = "",
    kind: str = RunKind.RUN,
) -> Run:
    """Start one run of `agent` to be executed next by `run_execute_opened` (a streamed answer).

    The same checks, gate, row and session as `run_execute`, in the caller's thread, so every
    refusal is raised before any byte of a stream: 400, 403, 402, 409 (`agent_external`,
    idempotency), 503. Out: the `running` run, or an earlier run answered again for the same
    idempotency key (`run.replayed` True: execute nothing). Org context required.
    """
    return run_start(RunRequest(kind=kind, agent=agent, input=input, actor=actor, request_id=request_id,
                                idempotency_key=idempotency_key, executor_here=True))


def run_execute_opened(*, run: Run, agent: Agent, listener: RunListener | None = None, kind: str = RunKind.RUN) -> Run:
    """Execute a run started by `run_open` under its own `agent.run` span; return it finished.

    `listener` hears the deltas, tool actions and ops (a streamed answer). Org context required.
    """
    return drive(run_execute_opened_steps(run=run, agent=agent, listener=listener, kind=kind))


def run_execute_opened_steps(*, run: Run, agent: Agent, listener: RunListener | None = None, kind: str = RunKind.RUN) -> Steps[Run]:
    """`run_execute_opened` as run steps (`runs.drive`): what a request's event loop awaits."""
    with run_span(run_id=run.id, agent_name=agent.name, actor=run.actor, model=agent.model, depth=run.depth, kind=kind) as span:
        return (yield from run_execute_started_steps(run=run, agent=agent, span=span, listener=listener))


def run_execute_started(*, run: Run, agent: Agent, span=None, deadline: float | None = None,
                        prompt: list[dict] | None = None, client_tools: list[dict] | None = None,
                        listener: RunListener | None = None, stop: StopSignal | None = None) -> Run:
    """Run the agent loop for `run` (already `running`, its session open) and finish it; return it.

    The executor attaches to the run's session (commands sent before it attached are
    replayed), executes, and hands the outcome to `run_finish` with its inbox and span.
    `agent` may be an unsaved `Agent` (a preset's model, instructions and tools for a
    conversation round). `prompt` replaces the composed opening messages (a conversation's
    thread: OpenAI-shaped messages, instructions included by the caller); `client_tools` are
    OpenAI function definitions offered but executed by the caller (their calls end the round
    as `ops`); `listener` hears deltas, tool actions and ops as they happen (`RunListener`).
    The returned run carries the round's `actions` and `ops` (lists; not stored columns).
    A caller with writes of its own to commit with the finish (a conversation round's reply)
    uses `run_conclude_steps` and finishes the run itself (`run_finishing`).
    Blocks while the model writes (`run_execute_started_steps` is the same as run steps).
    """
    return drive(run_execute_started_steps(run=run, agent=agent, span=span, deadline=deadline, prompt=prompt,
                                           client_tools=client_tools, listener=listener, stop=stop))


def run_execute_started_steps(*, run: Run, agent: Agent, span=None, deadline: float | None = None,
                              prompt: list[dict] | None = None, client_tools: list[dict] | None = None,
                              listener: RunListener | None = None, stop: StopSignal | None = None) -> Steps[Run]:
    """`run_execute_started` as run steps (`runs.drive`)."""
    concluded = yield from run_conclude_steps(run=run, agent=agent, span=span, deadline=deadline, prompt=prompt,
                                              client_tools=client_tools, listener=listener, stop=stop)
    if concluded.waiting is not None:
        return concluded.waiting
    return concluded.finished(run_finish(**concluded.finish_arguments()))


@dataclass
class Concluded:
    """Where a run executed here stands once its loop ended: `waiting` for approval (the run as
    recorded then), or to be finished with `outcome` (through `session`, under `span`).

    `finish_arguments()` are `run_finish` / `run_finishing`'s; `finished(row)` returns the run
    to answer with (the finished row, or the run as recorded when someone else finished it),
    carrying the round's `actions` and `ops`.
    """

    run: Run
    outcome: Outcome
    session: RunSession
    span: Span | None = None
    waiting: Run | None = None

    def finish_arguments(self) -> dict:
        """Return the keyword arguments of `run_finish` / `run_finishing` for this run."""
        return {"run_id": self.run.id, "outcome": self.outcome, "from_statuses": _RUNNING, "session": self.session,
                "span": self.span}

    def finished(self, row: Run | None) -> Run:
        """Return `row` (None: the run was finished elsewhere meanwhile — recovery — so as recorded) with `actions`/`ops`.

        A run deleted meanwhile with its agent (DELETE /v1/agents/{ref} deletes its runs) is
        recorded nowhere any more: it is answered with this outcome, as the caller would have
        seen it (issue 51: found by the soak; it raised `DoesNotExist` in the worker).
        """
        finished = row if row is not None else Run.objects.filter(pk=self.run.id).first()
        if finished is None:
            finished = self.run
            finished.status = self.outcome.status
            finished.output, finished.error, finished.model = self.outcome.output, self.outcome.error, self.outcome.model or self.run.model
        finished.replayed = False
        finished.actions = self.outcome.actions
        finished.ops = self.outcome.ops
        return finished


def run_conclude_steps(*, run: Run, agent: Agent, span=None, deadline: float | None = None,
                       prompt: list[dict] | None = None, client_tools: list[dict] | None = None,
                       listener: RunListener | None = None, stop: StopSignal | None = None) -> Steps[Concluded]:
    """Run the agent loop for `run` (already `running`) and return where it stands, unfinished.

    As `run_execute_started_steps`, but the run is not finished here: a run whose model called
    a ruled tool is suspended `waiting` (`Concluded.waiting`); otherwise the caller finishes it
    with `run_finishing(**concluded.finish_arguments())`, its own writes in the `with` body (a
    conversation round's reply and the release of its conversation).
    """
    session = (RunSession.attach(session_id=run.session_id, actor=run.actor, opened_here=getattr(run, "opened_here", False),
                                 root=getattr(run, "session_root", None), inbox=getattr(run, "executor_inbox", None))
               if run.session_id else RunSession(actor=run.actor))
    loop = RunLoop(agent=agent, text=run.input, run=run, session=session, org_slug=stores.current_org(), deadline=deadline,
                   prompt=prompt, client_tools=client_tools, listener=listener, stop=stop)
    return (yield from _conclude_steps(run=run, loop=loop, session=session, span=span))


def run_settle(*, run: Run, loop: RunLoop, session: RunSession, span=None) -> Run:
    """Execute `loop` and record where the run stands: finished (`run_finish`), or `waiting` for
    approval (`run_wait`: nothing of this process is held for it). Return the run as recorded,
    carrying the round's `actions` and `ops`. Blocks while the model writes."""
    return drive(run_settle_steps(run=run, loop=loop, session=session, span=span))


def run_settle_steps(*, run: Run, loop: RunLoop, session: RunSession, span=None) -> Steps[Run]:
    """`run_settle` as run steps (`runs.drive`)."""
    concluded = yield from _conclude_steps(run=run, loop=loop, session=session, span=span)
    if concluded.waiting is not None:
        return concluded.waiting
    return concluded.finished(run_finish(**concluded.finish_arguments()))


def _conclude_steps(*, run: Run, loop: RunLoop, session: RunSession, span=None) -> Steps[Concluded]:
    """Execute `loop`; return the run suspended `waiting`, or the outcome to finish it with."""
    started = time.perf_counter()
    outcome = yield from loop.steps()
    outcome.duration_ms = elapsed_ms(started)
    if outcome.status == RunStatus.WAITING and loop.waiting is not None:
        waiting = run_wait(run=run, outcome=outcome, session=session, round_no=loop.waiting.round_no, calls=loop.waiting.calls)
        if waiting is not None:
            waiting.replayed = False
            waiting.actions = outcome.actions
            waiting.ops = outcome.ops
            return Concluded(run=run, outcome=outcome, session=session, span=span, waiting=waiting)
        outcome.status, outcome.error = RunStatus.ERROR, "the run could not be suspended for approval"
    return Concluded(run=run, outcome=outcome, session=session, span=span)
