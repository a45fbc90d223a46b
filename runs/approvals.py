"""Human approval of tool calls (issue 28): a run asks, waits holding nothing, and is answered.

* Asking — `run_wait`: the executor's model turn called a tool the agent's `approval` rules
  name (`agents.approval_rules`). In one org-store transaction the run moves `running →
  waiting` (`runs.lifecycle.run_mark_waiting`; it keeps holding its fee: `RunStatus.HOLDS_FEE`), every call of the turn gets an
  `Approval` row (those needing approval `pending`, the others `waiting` with them) and each
  pending one an `approval` event in the session (tool-call id, tool, arguments masked like
  every turn, who may answer). The session reports `paused`, the executor lets go of its inbox
  and returns: no request, thread, worker slot or connection is held while a person decides.
* Answering — `approval_answer` (POST …/sessions/{id}/approve, …/deny): checked, then in one
  transaction the row moves `pending → approved|denied` by a conditional UPDATE (of two
  simultaneous answers one wins, the other is 409) and a `control` event records the answer.
  When no call of the run is pending any more, the resume task is queued once that commits
  (`runs.tasks.resume_run` → `resume_answered` → the kind's `RunPolicy.resume`: the agent loop,
  `agents.execution.resume`) — or, for a kind resumed elsewhere (a routed run:
  `targets.approvals`), its policy's `resume_elsewhere` offers it again in the same transaction.
* Stopping, expiring — a `stop` on a waiting run's session ends the run at once (`error`
  "stopped by …", unbilled); the sweep ends runs whose request is older than
  `AGENTS_APPROVAL_TIMEOUT_SECONDS` (`error` "approval timed out", unbilled) and re-queues the
  resume of a run answered whose task was lost. A `resume` command while a request is pending
  is 409 `approval_pending` (`approval_guard`).
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agents_site import permissions
from runs import hooks
from runs.models import Approval, Run
from runs.run_session import RunSession
from runs.lifecycle import Outcome, run_finish, run_mark_waiting, stop_reason
from runs.policies import run_policy
from agents_site.errors import ApiError, Conflict, Forbidden, InvalidRequest, NotFound
from agents_site.ids import mint_id
from agents_site.vocabulary import (
    ApiKeyScope, ApprovalOutcome, ApprovalState, ControlCommand, ErrorCode, EventKind, FinishReason, RunStatus, SessionStatus,
)
from agents_site.secretbox import encrypt_secret, decrypt_secret
from agents_site.wire import rfc3339
from sessions.scanner import redact_text
from sessions.selectors import last_control_actor, session_get, stop_recorded
from tenancy import stores
from sessions.services import append_checked, append_checked_turns, refuse_secrets
from sessions import services as session_services  # check_turn read at call time: tests inject store faults there
from sessions import fields
from sessions.models import Session
from sessions.presenters import event_view

logger = logging.getLogger(__name__)

#: The django-q2 function that resumes a run whose approvals are all answered.
RESUME_TASK = "runs.tasks.resume_run"
#: The error of a run nobody answered in time (not billed).
APPROVAL_TIMED_OUT = "approval timed out"
#: The tool result a resumed run hands the model for a call that had started when its worker was lost.
INTERRUPTED_RESULT = "interrupted, not re-run: the tool had started when the run's worker was lost; it was not executed again"
#: How long an answered run may wait for its resume task before the sweep queues it again.
RESUME_GRACE = timedelta(seconds=60)
MAX_DENY_MESSAGE_BYTES = 16 * 1024

_WAITING = frozenset({RunStatus.WAITING})
#: The states of the calls of a run's waiting turn (answered or not, not executed yet).
TURN_OPEN = frozenset({ApprovalState.PENDING, ApprovalState.WAITING, ApprovalState.APPROVED, ApprovalState.DENIED,
                       ApprovalState.STARTED})


class ApprovalPending(Conflict):
    """409: the session's run waits for an approval; a `resume` cannot carry it on."""

    code = ErrorCode.APPROVAL_PENDING
    default_message = "an approval is pending on this session: approve or deny it (or stop the run)"


class ApprovalAnswered(Conflict):
    """409: the approval request was already answered, or its run is no longer waiting."""

    code = ErrorCode.APPROVAL_ANSWERED
    default_message = "this approval request was already answered"


class InvalidArguments(ApiError):
    """422: edited arguments do not fit the tool's parameter schema."""

    status = 422
    code = ErrorCode.INVALID_ARGUMENTS
    default_message = "the arguments do not fit the tool's parameters"


def _masked(text: str) -> str:
    return redact_text(text)[0] if text else text


# Issue 49 item 2: a ruled call's arguments are the one raw value that must survive until the call runs.
# They are stored sealed (Fernet under the deployment key, as webhook secrets are), opened only to
# execute the call, and replaced by their masked form once the call is decided and settled.
SEALED = "sealed:v1:"


def seal_arguments(raw: str) -> str:
    """Return `raw` (a call's JSON arguments) as stored: `sealed:v1:<Fernet token>` (`""` stays `""`)."""
    return SEALED + encrypt_secret(raw) if raw else raw


def open_arguments(stored: str) -> str:
    """Return the raw arguments of a stored value (`seal_arguments`'s, or a row stored plainly before
    issue 49); `""` when no deployment key opens it. Only to execute the approved call."""
    if stored and stored.startswith(SEALED):
        return decrypt_secret(stored[len(SEALED):]) or ""
    return stored or ""


def settled_arguments(stored: str) -> str:
    """Return what a decided call's arguments become once its call is settled: their masked form."""
    return _masked(open_arguments(stored))


def masked_arguments(raw: str):
    """Return a call's arguments for display: decoded JSON with credentials masked (text if not JSON).

    `raw` as stored (sealed or masked) or plain."""
    text = _masked(open_arguments(raw or ""))
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return text


def may_answer(run: Run) -> dict:
    """Return who may answer `run`'s requests, as recorded in its `approval` events."""
    return {"startedBy": run.actor, "orgAdmins": True}


def answer_rule(principal) -> dict:
    """Return whose runs `principal` may answer the approval requests of: `{"all": bool, "actor": str}`.

    `all` True: every run of the org (an org admin); else only the runs whose `actor` is
    `actor` (the runs this user started). The permission table's rule for runs
    (`agents_site.permissions.owner_rule`): behind `answer_allowed` (the approve/deny routes),
    the stop route and the console's inline Stop/Approve/Deny buttons (`console.context`), so a
    page never offers an action the API would refuse. Key scope and allowed agents are checked
    apart (`_check_answerer`): the console's session login has neither.
    """
    return permissions.owner_rule(principal)


def answer_allowed(rule: dict, *, started_by: str) -> bool:
    """Return True when `rule` (`answer_rule`) lets its principal answer a run `started_by` started."""
    return permissions.owns(rule, started_by=started_by)


def approval_outcome(row: Approval) -> str | None:
    """Return how request `row` ended as a person reads it (`ApprovalOutcome`), None while it is open.

    The decision wins over the call's later states: approved (or `edited`, when the approver
    changed the arguments) and denied stay so once the call ran. Unanswered: `timed out` (the
    sweep expired it) or `stopped` (its run was stopped while it waited).
    """
    decision = row.decision or (row.state if row.state in ApprovalState.DECIDED else "")
    if decision == ApprovalState.APPROVED:
        return ApprovalOutcome.EDITED if row.edited else ApprovalOutcome.APPROVED
    if decision == ApprovalState.DENIED:
        return ApprovalOutcome.DENIED
    if row.state == ApprovalState.EXPIRED:
        return ApprovalOutcome.TIMED_OUT
    if row.state == ApprovalState.CANCELLED:
        return ApprovalOutcome.STOPPED
    return None


def approval_view(row: Approval, *, started_by: str | None = None) -> dict:
    """Return the wire view of one approval request (or call waiting with it).

    `{toolCallId, tool, arguments (masked), state, outcome?, needsApproval, runId, sessionId,
    round, requestSeq?, edited, answeredBy?, message?, startedBy?, createdAt, answeredAt?}`:
    `outcome` (`approval_outcome`) once the request was answered or ended; `startedBy` the
    actor of the run (who may answer besides the org's admins) when the caller knows it.
    """
    view = {
        "toolCallId": row.tool_call_id, "tool": row.tool_name, "arguments": masked_arguments(row.arguments),
        "state": row.state, "outcome": approval_outcome(row) if row.needs_approval else None,
        "needsApproval": row.needs_approval, "runId": row.run_id, "sessionId": row.session_id,
        "round": row.round, "requestSeq": row.request_seq, "edited": row.edited, "answeredBy": row.answered_by or None,
        "message": row.message or None, "startedBy": started_by or None, "createdAt": rfc3339(row.created_at),
        "answeredAt": rfc3339(row.answered_at),
    }
    return {k: v for k, v in view.items() if v is not None}


def approval_views(rows: list[Approval]) -> list[dict]:
    """Return the wire views of `rows`, each with its run's `startedBy` (one query for the runs' actors)."""
    actors = dict(Run.objects.filter(pk__in={row.run_id for row in rows}).values_list("id", "actor")) if rows else {}
    return [approval_view(row, started_by=actors.get(row.run_id)) for row in rows]


def run_approvals(*, run_id: str) -> list[Approval]:
    """Return the calls of run `run_id`'s waiting turn (every state not yet executed), in order."""
    return list(Approval.objects.filter(run_id=run_id, state__in=TURN_OPEN).order_by("created_at", "position"))


def run_approval_history(*, run_id: str) -> list[Approval]:
    """Return every approval request run `run_id` ever asked (any state), oldest first: a finished
    run's detail keeps saying what was asked and how it was answered."""
    return list(Approval.objects.filter(run_id=run_id, needs_approval=True).order_by("created_at", "position"))


def pending_views(session_id: str) -> list[dict]:
    """Return the wire views of session `session_id`'s pending approval requests, oldest first."""
    rows = Approval.objects.filter(session_id=session_id, needs_approval=True, state=ApprovalState.PENDING).order_by("created_at", "position")
    return approval_views(list(rows))


def approvals_list(*, session_id: str | None = None, limit: int = 100, actor: str | None = None) -> list[Approval]:
    """Return the org's approval requests (of one session when `session_id` is given), pending first
    (oldest first), then the newest answered; at most `limit`. `actor` narrows to the runs that
    actor started (a member's own: `agents_site.permissions.own_actor`). Two queries."""
    asked = Approval.objects.filter(needs_approval=True)
    if actor is not None:
        asked = asked.filter(run_id__in=Run.objects.filter(actor=actor).values("id"))
    if session_id:
        asked = asked.filter(session_id=session_id)
    pending = list(asked.filter(state=ApprovalState.PENDING).order_by("created_at", "position")[:limit])
    rest = list(asked.exclude(state=ApprovalState.PENDING).order_by("-created_at", "position")[: max(limit - len(pending), 0)])
    return pending + rest


def run_wait(*, run: Run, outcome: Outcome, session: RunSession, round_no: int, calls: list[tuple]) -> Run | None:
    """Suspend `run` (executing here, `running`) on its model turn's `calls`; return it `waiting`.

    `calls` are `(call, tool or None, needs)` for every call of the turn, in order. One
    transaction: the run `running → waiting` (with the usage so far), an `Approval` row per
    call, an `approval` event per call needing approval. Then the session reports `paused` and
    the executor's inbox is let go. Returns None (nothing written) when the run was no longer
    `running` (a stop finished it meanwhile). Org context required.
    """
    session.set_status(SessionStatus.PAUSED)  # the turns held so far are written first
    now = timezone.now()
    rows: list[Approval] = []
    with stores.org_atomic():
        if not run_mark_waiting(run_id=run.id, outcome=outcome):  # `running → waiting`, with the usage so far
            return None
        for position, (call, tool, needs) in enumerate(calls):
            function = getattr(call, "function", None)
            wire = getattr(function, "name", "") or ""
            rows.append(Approval(
                id=mint_id("apr"), run_id=run.id, session_id=run.session_id, tool_call_id=(getattr(call, "id", "") or f"call_{position}")[:128],
                tool_name=(tool.name if tool is not None else wire)[:200], wire_name=wire[:200],
                arguments=seal_arguments(getattr(function, "arguments", "") or ""), needs_approval=bool(needs), position=position, round=round_no,
                state=ApprovalState.PENDING if needs else ApprovalState.WAITING, created_at=now,
            ))
        Approval.objects.bulk_create(rows)
        if run.session_id:
            asked = [row for row in rows if row.needs_approval]
            turns = [session_services.check_turn(kind=EventKind.APPROVAL, actor=run.actor[:256], payload={
                "request": True, "toolCallId": row.tool_call_id, "tool": row.tool_name, "arguments": masked_arguments(row.arguments),
                "round": round_no, "runId": run.id, "mayAnswer": may_answer(run),
                "waitsWith": [other.tool_call_id for other in rows if other is not row],
            }) for row in asked]
            for row, event in zip(asked, append_checked_turns(session_id=run.session_id, turns=turns)):
                row.request_seq = event.seq
                Approval.objects.filter(pk=row.pk).update(request_seq=event.seq)
    session.release()  # the executor lets go: the run is answered by a new task, never by this thread
    waiting = Run.objects.select_related("agent").get(pk=run.id)
    waiting.approvals = rows
    hooks.run_waiting_handlers(waiting, [approval_view(row) for row in rows], stores.current_org())  # `run.waiting` webhooks
    return waiting


def _check_answerer(principal, run: Run) -> None:
    if principal.scope == ApiKeyScope.OPENAI:
        raise Forbidden("an API key of scope openai cannot answer approvals")
    if not principal.may_use_agent(agent_id=run.agent_id or "", agent_name=run.agent_name):
        raise Forbidden("this API key may not use this agent")
    if not answer_allowed(answer_rule(principal), started_by=run.actor):
        raise Forbidden("only the user who started the run or an org admin may answer its approvals")


def _checked_arguments(row: Approval, run: Run, arguments) -> str:
    """Return edited `arguments` as JSON text once they fit the tool's schema (422) and carry no credential (422)."""
    from jsonschema import Draft202012Validator


    if not isinstance(arguments, dict):
        raise InvalidArguments("arguments must be a JSON object")
    refuse_secrets(arguments)  # 422 secret_in_transcript, findings masked
    schema = hooks.tool_schema(row.tool_name, agent_name=run.agent_name, depth=run.depth) or {"type": "object"}
    errors = sorted(Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.path)
        raise InvalidArguments(f"arguments{'/' + where if where else ''}: {first.message}"[:500])
    return json.dumps(arguments, ensure_ascii=False)


def approval_answer(*, session_id: str, tool_call_id, principal, approve: bool, arguments=None, message=None) -> dict:
    """Approve (optionally with edited `arguments`) or deny (with a `message`) one pending tool call.

    Spec: issue 28 — POST /v1/agents/sessions/{id}/approve `{toolCallId, arguments?}` and
    …/deny `{toolCallId, message?}`. Order: 404 unknown or another org's session → 400 no
    `toolCallId` → 404 no request of that id in the session → 403 (a key of scope `openai`, a
    key whose allowed agents leave this agent out, a caller who neither started the run nor
    administers the org) → 409 `approval_answered` (answered already, or the run no longer
    waits) → 400 message too long / 422 `secret_in_transcript` (message or arguments) → 422
    `invalid_arguments` (edited arguments outside the tool's schema) → the answer and its
    `control` event in one transaction. Returns `{command, event, forwarded, approval}`:
    `forwarded` is True when this answer was the run's last one and its resume was queued.
    Org context required.
    """
    session = session_get(session_id=session_id)
    if not isinstance(tool_call_id, str) or not tool_call_id.strip():
        raise InvalidRequest("toolCallId is required")
    row = (Approval.objects.filter(session_id=session.id, tool_call_id=tool_call_id, needs_approval=True)
           .order_by("-created_at").first())
    if row is None:
        raise NotFound("no approval request with this toolCallId on this session")
    run = Run.objects.filter(pk=row.run_id).first()
    if run is None:
        raise NotFound("no approval request with this toolCallId on this session")
    _check_answerer(principal, run)
    if row.state != ApprovalState.PENDING or run.status != RunStatus.WAITING:
        raise ApprovalAnswered()
    command = ControlCommand.APPROVE if approve else ControlCommand.DENY
    edited = None
    if approve and arguments is not None:
        edited = _checked_arguments(row, run, arguments)
    if not approve:
        message = fields.clean_message(message)
        refuse_secrets(message)
    body: dict = {"command": str(command), "toolCallId": row.tool_call_id}
    if edited is not None:
        body["arguments"] = masked_arguments(edited)
    if message:
        body["message"] = message
    now = timezone.now()
    org = stores.current_org()
    with stores.org_atomic():
        # The session row is the lock of every answer of its run: the last answer sees all others.
        if Session.objects.select_for_update().filter(pk=session.id).values_list("status", flat=True).first() in SessionStatus.TERMINAL:
            raise ApprovalAnswered("the run has ended; its approval requests can no longer be answered")
        decided = ApprovalState.APPROVED if approve else ApprovalState.DENIED
        changes = {"state": decided, "decision": decided, "answered_by": principal.actor[:300],
                   "answered_at": now, "message": (message or "") if not approve else ""}
        if edited is not None:
            changes.update(arguments=seal_arguments(edited), edited=True)
        if not approve:  # a denied call never runs: its arguments are settled now
            changes["arguments"] = settled_arguments(row.arguments)
        if not Approval.objects.filter(pk=row.pk, state=ApprovalState.PENDING).update(**changes):
            raise ApprovalAnswered()
        if not Run.objects.filter(pk=run.id, status=RunStatus.WAITING).exists():
            raise ApprovalAnswered()
        event = append_checked(session_id=session.id, kind=EventKind.CONTROL, actor=principal.actor[:256],
                               payload_text=json.dumps(body, ensure_ascii=False, separators=(",", ":")))
        last = not Approval.objects.filter(run_id=run.id, state=ApprovalState.PENDING).exists()
        if last:
            elsewhere = run_policy(run.kind).resume_elsewhere
            if elsewhere is not None:  # resumed elsewhere (a routed run: offered to its machine again), with this answer
                elsewhere(run)
            else:
                transaction.on_commit(lambda: resume_dispatch(org=org, run_id=run.id), using=stores.current_alias())
    row.refresh_from_db()
    return {"command": str(command), "event": event_view(event), "forwarded": last, "approval": approval_view(row, started_by=run.actor)}


def resume_dispatch(*, org: str, run_id: str) -> str | None:
    """Queue the task resuming run `run_id` of `org` (its approvals all answered); return the task id.

    Safe to call twice: the resume moves the run `waiting → running` with one conditional
    UPDATE, so one task resumes it. None when the broker refused (the sweep queues it again).
    """
    from django_q.tasks import async_task

    try:
        return async_task(RESUME_TASK, org, run_id, task_name=f"resume-{run_id}", group="agents.resume")
    except Exception:
        logger.exception("could not queue the resume of run %s of %s", run_id, org)
        return None


def resume_answered(*, run_id: str) -> str:
    """Resume waiting run `run_id` once every call of its turn is answered, as its kind's policy says; return its status after.

    The body of the resume task (`runs.tasks.resume_run`), queued by the last answer and again by
    the sweep if that task was lost: safe to run twice. A run not waiting, or with a request still
    pending, is left alone. A stop recorded while the run was suspending (no executor nor handler
    took it) ends it stopped, unbilled. Otherwise its kind's `RunPolicy` resumes it:
    `resume_elsewhere(run)` in one transaction (a routed run: offered to its machine again), or
    `resume(run)` here (the agent loop carries on from the log). A kind with neither ends the run
    `error` "the run could not be resumed: …" (unbilled). Org context required.
    """
    run = Run.objects.select_related("agent").filter(pk=run_id).first()
    if run is None:
        return ""
    if run.status != RunStatus.WAITING or Approval.objects.filter(run_id=run_id, state=ApprovalState.PENDING).exists():
        return run.status
    stop = stop_recorded(session_id=run.session_id) if run.session_id else None
    if stop is not None:
        waiting_run_stop(run_id=run_id, actor=stop.get("actor", ""), message=stop.get("message"))
        return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""
    policy = run_policy(run.kind)
    if policy.resume_elsewhere is not None:
        with stores.org_atomic():
            policy.resume_elsewhere(run)
        return run.status
    if policy.resume is None:
        _end_waiting(run_id, Outcome.failed(f"the run could not be resumed: runs of kind {run.kind} do not resume here"),
                     ApprovalState.CANCELLED)
        return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""
    return policy.resume(run)


def run_rewait(*, run_id: str) -> bool:
    """Put a resumed run whose worker was lost before it settled its answered turn back to `waiting`.

    Called by recovery for a lost `running` run: when calls of its waiting turn are still
    unsettled (`approved`, `denied`, `waiting`, `started`), the run goes `running → waiting`
    (one conditional UPDATE) and its resume is queued again; a call found `started` is then
    handed to the model as "interrupted, not re-run", never executed twice. Returns True when
    it did; False leaves the run to be finished "worker lost". Org context required.
    """
    if not Approval.objects.filter(run_id=run_id, state__in=TURN_OPEN - {ApprovalState.PENDING}).exists():
        return False
    return run_mark_waiting(run_id=run_id)


def approval_guard(*, session, command: str) -> None:
    """Refuse a `resume` command while the session's run waits for an approval (409 `approval_pending`).

    The run machinery's session observer calls it (`runs.wiring`, `sessions.hooks`). Org context required.
    """
    if command == ControlCommand.RESUME and Approval.objects.filter(session_id=session.id, state=ApprovalState.PENDING).exists():
        raise ApprovalPending()


def waiting_command(*, session, command: str, message: str | None = None) -> bool:
    """End a waiting run at once on a `stop` recorded on its session; return True when it did.

    Registered with `sessions.control` (a waiting run has no live executor). The run ends
    `error` "stopped by <actor>[: message]" with `finishReason` `stopped`, unbilled; its open
    requests become `cancelled`. Other commands are left recorded (a `pause` or `message`
    applies when the run resumes). Org context required.
    """
    if command != ControlCommand.STOP:
        return False
    run = Run.objects.filter(session_id=session.id, status=RunStatus.WAITING).only("id").first()
    if run is None:
        return False
    return waiting_run_stop(run_id=run.id, actor=last_control_actor(session_id=session.id), message=message)


def waiting_run_stop(*, run_id: str, actor: str, message: str | None = None) -> bool:
    """End waiting run `run_id` as stopped by `actor` (`message` its reason); return True when it did.

    `error` "stopped by <actor>[: message]", `finishReason` `stopped`, unbilled; its open requests
    become `cancelled`. False when the run is no longer waiting. Org context required.
    """
    outcome = Outcome(status=RunStatus.ERROR, error=stop_reason(f"stopped by {actor or 'the control plane'}", message),
                      finish_reason=FinishReason.STOPPED)
    return _end_waiting(run_id, outcome, ApprovalState.CANCELLED)


def _end_waiting(run_id: str, outcome: Outcome, state: str) -> bool:
    with stores.org_atomic():
        finished = run_finish(run_id=run_id, outcome=outcome, from_statuses=_WAITING)
        if finished is None:
            return False
        Approval.objects.filter(run_id=run_id, state__in=TURN_OPEN - {ApprovalState.STARTED}).update(state=state)
    return True


def approvals_sweep(*, now: datetime | None = None) -> list[str]:
    """End the current org's runs waiting past `AGENTS_APPROVAL_TIMEOUT_SECONDS`; re-queue lost resumes.

    A run with a request unanswered since before the cutoff ends `error` "approval timed out"
    (unbilled; its requests `expired`). A `waiting` run with nothing pending whose last answer is
    older than a minute lost its resume task (a broker down, a restart): it is queued again.
    Returns the ids of the runs ended. Run as the `approvalsExpired` sweep (`runs.sweeps`).
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.AGENTS_APPROVAL_TIMEOUT_SECONDS)
    ended = []
    stale = (Approval.objects.filter(state=ApprovalState.PENDING, created_at__lt=cutoff)
             .values_list("run_id", flat=True).distinct())
    for run_id in list(stale):
        if _end_waiting(run_id, Outcome.failed(APPROVAL_TIMED_OUT), ApprovalState.EXPIRED):
            ended.append(run_id)
    org = stores.current_org()
    for run_id, kind in Run.objects.filter(status=RunStatus.WAITING).values_list("id", "kind"):
        rows = Approval.objects.filter(run_id=run_id, state__in=TURN_OPEN)
        if rows.filter(state=ApprovalState.PENDING).exists():
            continue
        last = max((a for a in rows.values_list("answered_at", flat=True) if a), default=None)
        if last is None or last < now - RESUME_GRACE:
            elsewhere = run_policy(kind).resume_elsewhere
            if elsewhere is None:
                resume_dispatch(org=org, run_id=run_id)
                continue
            with stores.org_atomic():  # idempotent: a routed run already offered again stays as it is
                waiting = Run.objects.filter(pk=run_id, status=RunStatus.WAITING).first()
                if waiting is not None:
                    elsewhere(waiting)
    return ended
