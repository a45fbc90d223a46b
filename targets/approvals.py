"""Approval of tool calls on routed runs (issue 28 item 7): the machine asks, and lets go while a person decides.

The same rules, requests, answers and clock as a run on the server (`runs.approvals`);
only who executes differs:

* Asking — the runner's model turn calls a tool the agent's rules name (the rules travel in the
  offer, `approval`; the runner matches them with the shared `toolkit.approval`). The runner
  posts its steps so far and reports `{status: "waiting", waiting: {round, calls}}` on the report
  route (`routed_wait`). One transaction: the offer `claimed → waiting` (no claim held: the runner
  goes back to claiming other work), and the run suspended exactly as on the server (`run_wait`:
  `running → waiting`, an `Approval` row per call, `approval` events, the session `paused`).
* Answering — the same approve/deny routes. The last answer calls `routed_resume_offer` (this
  kind's `RunPolicy.resume_elsewhere`, `targets.apps`) in its own transaction: the
  offer `waiting → offered`, the machine's claims woken. The run stays `waiting` until a claim wins.
* Resuming — the claim that wins a resumed offer (`resume_claimed`, in the claim's transaction)
  moves the run `waiting → running` and takes each approved call (`approved|waiting → started`:
  the transaction that lets it execute, so it executes at most once); its answer carries `resume`:
  the conversation rebuilt from the session's log as the server's own resume does
  (`agents.execution.resume.resumed_messages`), the turn's calls (approved ones with the arguments
  to run, edited or not; denied ones with the result the model gets), the control cursor and the
  usage so far. A claim whose client left is put back (`resume_released`). The machine's next
  report settles the turn (`turn_settled`: `started|denied → done`).
* Stopping, expiring — the server's handlers end the waiting run; `routed_run_finishing` then
  withdraws its offer, so no machine claims a finished run.

Org context required everywhere.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from django.utils import timezone

from agents.models import Agent
from runs.models import Approval, Run
from runs.run_session import RunSession
from runs.approvals import INTERRUPTED_RESULT, open_arguments, run_approvals, run_wait, settled_arguments
from runs.lifecycle import Outcome, run_mark_resumed, run_mark_waiting
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ApprovalState, RoutedRunState, RunKind, RunStatus, SessionStatus
from targets import wake
from targets.models import RoutedRun
from tenancy import stores
from toolkit.approval import needs_approval
from agents.execution.resume import denied_result, resumed_messages
from sessions.services import session_update

MAX_CALLS = 64
MAX_CALL_ID = 128
MAX_TOOL_NAME = 200
MAX_ARGUMENT_BYTES = 64 * 1024


class _NotSuspended(Exception):
    """The run could not be suspended (finished meanwhile): undo the offer's move."""


def _calls(waiting) -> tuple[int, list[dict]]:
    """Return `(round, [{toolCallId, name, arguments}])` of a waiting report; 400 when malformed."""
    if not isinstance(waiting, dict):
        raise InvalidRequest("waiting: a waiting report carries {round, calls: [{toolCallId, name, arguments}]}")
    round_no = waiting.get("round")
    if not isinstance(round_no, int) or isinstance(round_no, bool) or not 1 <= round_no <= 1000:
        raise InvalidRequest("waiting.round must be an integer from 1")
    calls = waiting.get("calls")
    if not isinstance(calls, list) or not 1 <= len(calls) <= MAX_CALLS:
        raise InvalidRequest(f"waiting.calls must list 1 to {MAX_CALLS} tool calls")
    cleaned = []
    for index, call in enumerate(calls):
        where = f"waiting.calls[{index}]"
        if not isinstance(call, dict):
            raise InvalidRequest(f"{where} must be an object")
        call_id, name, arguments = call.get("toolCallId"), call.get("name"), call.get("arguments", "")
        if not isinstance(call_id, str) or not call_id.strip() or len(call_id) > MAX_CALL_ID:
            raise InvalidRequest(f"{where}.toolCallId must be 1 to {MAX_CALL_ID} characters")
        if not isinstance(name, str) or not name or len(name) > MAX_TOOL_NAME:
            raise InvalidRequest(f"{where}.name must be 1 to {MAX_TOOL_NAME} characters")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        if len(arguments.encode()) > MAX_ARGUMENT_BYTES:
            raise InvalidRequest(f"{where}.arguments too large")
        cleaned.append({"toolCallId": call_id, "name": name, "arguments": arguments})
    return round_no, cleaned


def routed_wait(*, target_id: str, run_id: str, waiting, report: dict) -> bool:
    """Suspend claimed run `run_id` on the machine's waiting turn; return whether it was taken.

    `waiting` is `{round, calls: [{toolCallId, name, arguments (JSON text)}]}` (every call of the
    turn, in order); `report` the clamped report (`clean_report`) whose model and usage are the
    run's totals so far. Which calls need approval is decided here, by the rules the offer carried.
    Raises `InvalidRequest` (400) for a malformed turn or one no rule names. False (nothing
    written) when this target holds no claim of the run, or the run no longer runs (a stop).
    """
    round_no, calls = _calls(waiting)
    offer = RoutedRun.objects.filter(pk=run_id, target_id=target_id, state=RoutedRunState.CLAIMED, reported_at__isnull=True).first()
    if offer is None:
        return False
    rules = (offer.payload or {}).get("approval") or {}
    needs = [needs_approval(rules, call["name"]) for call in calls]
    if not any(needs):
        raise InvalidRequest("waiting: no call of this turn needs approval under the agent's rules")
    run = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).first()
    if run is None:
        return False
    outcome = Outcome(status=RunStatus.WAITING, model=report.get("model") or "", attempts=max(run.attempts, 1),
                      prompt_tokens=report.get("promptTokens"), completion_tokens=report.get("completionTokens"),
                      tool_calls=report.get("toolCalls") or 0)
    turn = [(SimpleNamespace(id=call["toolCallId"], function=SimpleNamespace(name=call["name"], arguments=call["arguments"])), None, need)
            for call, need in zip(calls, needs)]
    try:
        with stores.org_atomic():
            moved = RoutedRun.objects.filter(pk=run_id, target_id=target_id, state=RoutedRunState.CLAIMED, reported_at__isnull=True).update(
                state=RoutedRunState.WAITING, claimed_at=None)
            if not moved:
                return False
            turn_settled(run_id=run_id)  # an earlier turn this machine resumed is done now
            if run_wait(run=run, outcome=outcome, session=RunSession.bind(session_id=run.session_id, actor=run.actor),
                        round_no=round_no, calls=turn) is None:
                raise _NotSuspended()
    except _NotSuspended:
        return False
    return True


def routed_resume_offer(run: Run) -> bool:
    """Offer waiting routed run `run` (its approvals all answered) to its machine again; return whether it moved.

    The resume dispatcher of routed runs (called in the last answer's transaction, and by the
    approvals sweep): the offer `waiting → offered`, its target's claims woken after commit.
    Idempotent: an offer already offered (or settled) is left as it is.
    """
    offer = RoutedRun.objects.filter(pk=run.id, state=RoutedRunState.WAITING).only("target_id").first()
    if offer is None:
        return False
    moved = RoutedRun.objects.filter(pk=run.id, state=RoutedRunState.WAITING).update(state=RoutedRunState.OFFERED, claimed_at=None)
    if moved:
        wake.notify_on_commit(target_id=offer.target_id)
    return bool(moved)


def _snapshot_agent(offer: RoutedRun, run: Run) -> Agent:
    """Return the agent as the run started (the offer's snapshot), unsaved: its prompt is the run's."""
    agent = (offer.payload or {}).get("agent") or {}
    return Agent(name=agent.get("name") or run.agent_name, model=agent.get("model") or run.model,
                 instructions=agent.get("instructions") or "", tools=list(agent.get("tools") or []))


def resume_claimed(offer: RoutedRun) -> bool:
    """Finish a claim of `offer` just won (`claimed`): True when the machine may run it.

    A fresh offer (its run not `waiting`) passes as it is. A resumed one (its run `waiting`,
    every call answered) is taken in one transaction: the run `waiting → running`, its approved calls
    (and those that waited with them) `→ started`, the session `running`; `offer.resume` then
    holds what the claim answers (see the module). A run that stopped waiting between the read
    and the move (finished meanwhile) has its offer withdrawn: False.
    """
    run = Run.objects.filter(pk=offer.run_id).first()
    if run is None or run.status != RunStatus.WAITING:  # a fresh offer: the machine runs it as it is
        return True
    with stores.org_atomic():
        if not run_mark_resumed(run_id=run.id):
            RoutedRun.objects.filter(pk=offer.run_id, state=RoutedRunState.CLAIMED).update(
                state=RoutedRunState.WITHDRAWN, withdrawn_at=timezone.now(), result={"status": RunStatus.ERROR, "error": "the run had ended"})
            return False
        rows = run_approvals(run_id=run.id)
        calls = []
        for row in rows:
            call = {"toolCallId": row.tool_call_id, "name": row.wire_name or row.tool_name}
            if row.state in (ApprovalState.APPROVED, ApprovalState.WAITING) and Approval.objects.filter(
                    pk=row.pk, state=row.state).update(state=ApprovalState.STARTED):
                call.update(execute=True, arguments=open_arguments(row.arguments))  # opened to run it (issue 49)
            elif row.state == ApprovalState.DENIED:
                call.update(execute=False, result=denied_result(row))
            else:  # started by a claim whose machine was lost: never executed twice
                Approval.objects.filter(pk=row.pk, state=ApprovalState.STARTED).update(state=ApprovalState.INTERRUPTED)
                call.update(execute=False, result=INTERRUPTED_RESULT)
            calls.append(call)
        messages, first_seq = resumed_messages(run, _snapshot_agent(offer, run), rows)
        if run.session_id:
            session_update(session_id=run.session_id, status=str(SessionStatus.RUNNING))
    offer.resume = {
        "round": rows[0].round if rows else 1, "messages": messages, "calls": calls, "cursor": max((first_seq or 1) - 1, 0),
        "usage": {"promptTokens": run.prompt_tokens or 0, "completionTokens": run.completion_tokens or 0, "toolCalls": run.tool_calls or 0},
    }
    return True


def resume_released(*, run_id: str) -> None:
    """Undo a resumed claim whose answer never reached the machine: the run `waiting` again, its
    calls as answered (`started → approved`, or `waiting` for a call that needed no approval)."""
    with stores.org_atomic():
        started = Approval.objects.filter(run_id=run_id, state=ApprovalState.STARTED)
        if not started.exists():
            return
        started.filter(needs_approval=True).update(state=ApprovalState.APPROVED)
        started.filter(needs_approval=False).update(state=ApprovalState.WAITING)
        run = Run.objects.filter(pk=run_id, status=RunStatus.RUNNING).only("session_id").first()
        if run is not None and run_mark_waiting(run_id=run_id) and run.session_id:
            session_update(session_id=run.session_id, status=str(SessionStatus.PAUSED))


def turn_settled(*, run_id: str) -> None:
    """Mark the calls of a resumed turn the machine handled (executed or handed the denial) `done`, their
    arguments settled to the masked form (issue 49)."""
    for row in Approval.objects.filter(run_id=run_id, state__in=(ApprovalState.STARTED, ApprovalState.DENIED)).only("pk", "state", "arguments"):
        Approval.objects.filter(pk=row.pk, state=row.state).update(state=ApprovalState.DONE, arguments=settled_arguments(row.arguments))


def routed_run_finishing(run) -> None:
    """Withdraw the offer of a routed run that finished while it waited or was offered again
    (a stop, the approval timeout): no machine claims a finished run. The `routed` kind's `RunPolicy.finishing`."""
    RoutedRun.objects.filter(pk=run.id, state__in=(RoutedRunState.WAITING, RoutedRunState.OFFERED)).update(
        state=RoutedRunState.WITHDRAWN, withdrawn_at=timezone.now(), result={"status": run.status, "error": run.error or ""})

