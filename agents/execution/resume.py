"""Resume a run whose approvals are answered: rebuild its conversation from the log, carry on (issue 28).

`run_resume` is the `RunPolicy.resume` of the kinds the agent loop executes: the resume task
(`runs.tasks.resume_run` → `runs.approvals.resume_answered`), queued by the last answer
(`runs.approvals.approval_answer`) and again by the sweep if that task was lost, calls it once the
run is found waiting with nothing pending and no stop recorded. Nothing of the process that
suspended the run is needed: the session's log is the checkpoint.

1. One conditional UPDATE (`runs.lifecycle.run_mark_resumed`) moves the run `waiting → running` (of two resume tasks one wins) and
   takes the run's worker lease (`runs.lease`), so recovery sees a live holder.
2. The conversation is rebuilt from the session's events before the turn's first `approval`
   event (`rebuild`): the instructions and input, then each assistant reply, each tool call
   with its recorded result (whole, as the model read it: `loop.tool_call_payload`), each `message` command.
   The waiting turn's calls, with their ids and the arguments the tools get, come from the
   run's `Approval` rows.
3. Each call of the turn is settled once, in order (`settle`): approved (or waiting with the
   others) → the transaction that moves its row to `started` is the one that lets it execute,
   so a second resume finds it `started` and hands the model "interrupted, not re-run" instead
   of executing it again; denied → the model gets the denial and its reason as the result.
4. The loop goes on from the next round and ends through `run_finish` (one debit, once), or
   waits again.
"""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

from django.utils import timezone

from agents.execution.loop import ResumePoint, RunLoop, compose_prompt, _command_text
from agents.execution.service import run_settle, run_span
from runs.lease import lease_kept, worker_identity
from runs.models import Approval, Run
from runs.run_session import RunSession
from runs import approvals
from runs.lifecycle import Outcome, run_finish, run_mark_resumed
from runs.models import RunTask
from runs.policies import run_policy
from sessions.selectors import log_before
from agents_site.vocabulary import ApprovalState, ChatRole, ControlCommand, EventKind, RunStatus, SessionStatus
from tenancy import stores

logger = logging.getLogger(__name__)


def rebuild(run: Run, agent, *, before: int) -> list[dict]:
    """Return the OpenAI messages of `run`'s conversation from its session's turns with seq < `before`.

    Example: input "hi", a reply with one tool call then its result → `[system, user "hi",
    assistant {tool_calls: [call]}, tool {tool_call_id, content}]`. The run's own input turn is
    the prompt's (not read back clipped); incomplete replies and bookkeeping are left out.
    """
    messages = run_policy(run.kind).opening_messages(run, agent) or compose_prompt(agent, run.input)
    group: dict | None = None  # the assistant message whose tool calls are being collected
    group_round = None
    for seq, kind, payload in log_before(session_id=run.session_id, before=before):
        if not isinstance(payload, dict):
            continue
        if kind == EventKind.MESSAGE and payload.get("role") == ChatRole.ASSISTANT and not payload.get("incomplete"):
            messages.append({"role": ChatRole.ASSISTANT, "content": payload.get("text") or ""})
            group = None
        elif kind == EventKind.TOOL_CALL and payload.get("runId") == run.id:
            if group is None or payload.get("round") != group_round:
                last = messages[-1]
                if last.get("role") == ChatRole.ASSISTANT and not last.get("tool_calls"):
                    group = last
                else:
                    group = {"role": ChatRole.ASSISTANT, "content": ""}
                    messages.append(group)
                group["tool_calls"], group_round = [], payload.get("round")
            call_id = payload.get("toolCallId") or f"call_{seq}"
            arguments = payload.get("arguments")
            group["tool_calls"].append({"id": call_id, "type": "function", "function": {
                "name": payload.get("name") or "", "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments or {})}})
            messages.append({"role": ChatRole.TOOL, "tool_call_id": call_id, "content": str(payload.get("result") or "")})
        elif kind == EventKind.CONTROL and payload.get("command") == ControlCommand.MESSAGE:
            text = _command_text(payload)
            if text:
                messages.append({"role": ChatRole.USER, "content": text})
                group = None
    return messages


def resumed_messages(run: Run, agent, rows: list[Approval]) -> tuple[list[dict], int | None]:
    """Return the conversation of waiting `run` up to its waiting turn, and the turn's first request seq.

    The messages are `rebuild`'s, ending with the assistant message that asked for the turn's
    calls (`rows`, in order; their arguments masked as the model's own turn is). The tool
    results follow from whoever resumes the run (here, or the machine of a routed run).
    """
    first_seq = min((row.request_seq for row in rows if row.request_seq), default=None)
    messages = rebuild(run, agent, before=first_seq or 2**62)
    last = messages[-1] if messages else {}
    if not (last.get("role") == ChatRole.ASSISTANT and not last.get("tool_calls")):
        last = {"role": ChatRole.ASSISTANT, "content": ""}
        messages.append(last)
    last["tool_calls"] = [{"id": row.tool_call_id, "type": "function",
                           "function": {"name": row.wire_name or row.tool_name, "arguments": approvals.settled_arguments(row.arguments)}} for row in rows]
    return messages, first_seq


def denied_result(row: Approval) -> str:
    """Return the tool result the model gets for denied call `row`: the denial and its reason."""
    reason = f"denied by {row.answered_by or 'a person'}" + (f": {row.message}" if row.message else "")
    return f"The tool call was not executed: {reason}."


def _call(row: Approval):
    # The one place sealed arguments are opened: to execute the approved call (issue 49).
    return SimpleNamespace(id=row.tool_call_id, function=SimpleNamespace(name=row.wire_name or row.tool_name,
                                                                         arguments=approvals.open_arguments(row.arguments)))


def settle(loop: RunLoop, row: Approval, by_wire: dict) -> str:
    """Return the tool result of one call of the resumed turn, executing it at most once ever."""
    call = _call(row)
    if row.state == ApprovalState.DENIED:
        result = denied_result(row)
        loop.record_call(call, row.round, name=row.tool_name, result=result, failed=True)
        Approval.objects.filter(pk=row.pk, state=ApprovalState.DENIED).update(state=ApprovalState.DONE,
                                                                               arguments=approvals.settled_arguments(row.arguments))
        return result
    if row.state in (ApprovalState.APPROVED, ApprovalState.WAITING):
        with stores.org_atomic():  # the transaction that lets the tool start; it commits before the call
            took = Approval.objects.filter(pk=row.pk, state=row.state).update(state=ApprovalState.STARTED)
        if took:
            result = loop.run_call(call, by_wire, row.round)
            Approval.objects.filter(pk=row.pk, state=ApprovalState.STARTED).update(state=ApprovalState.DONE,
                                                                                   arguments=approvals.settled_arguments(row.arguments))
            return result
    # Started by an earlier resume whose worker was lost (or taken meanwhile): never executed twice.
    Approval.objects.filter(pk=row.pk, state=ApprovalState.STARTED).update(state=ApprovalState.INTERRUPTED,
                                                                           arguments=approvals.settled_arguments(row.arguments))
    loop.record_call(call, row.round, name=row.tool_name, result=approvals.INTERRUPTED_RESULT, failed=True)
    return approvals.INTERRUPTED_RESULT


def run_resume(run: Run) -> str:
    """Resume waiting `run` here, every call of its turn answered; return its status after.

    The `RunPolicy.resume` of the kinds the agent loop executes (`run`, `tool`, `scheduled`,
    `chat`, `openai`), called by the resume task (`runs.approvals.resume_answered`) once it found
    the run `waiting`, nothing pending and no stop recorded; `run` is read with its agent. A
    run another resume took meanwhile is left alone. Org context required.
    """
    run_id = run.id
    now = timezone.now()
    with stores.org_atomic():
        if not run_mark_resumed(run_id=run_id):
            return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""
        task, _ = RunTask.objects.get_or_create(run_id=run_id, defaults={"created_at": now})
        RunTask.objects.filter(pk=task.pk).update(worker=worker_identity(), heartbeat_at=now)
    rows = approvals.run_approvals(run_id=run_id)
    agent = run.agent
    if agent is None or not rows:
        run_finish(run_id=run_id, outcome=Outcome.failed("the run could not be resumed: " + ("its agent no longer exists" if agent is None else "its waiting turn is missing")))
        return RunStatus.ERROR
    messages, first_seq = resumed_messages(run, agent, rows)
    session = RunSession.attach(session_id=run.session_id, actor=run.actor, after=(first_seq or 1) - 1)
    session.set_status(SessionStatus.RUNNING)
    loop_kwargs = dict(agent=agent, text=run.input, run=run, session=session, org_slug=stores.current_org(), deadline=None,
                       resume=ResumePoint(messages=messages, round_no=rows[0].round, rows=rows, settle=settle))
    loop = RunLoop(**loop_kwargs)
    # The usage before the wait carries on (the finish records the run's totals).
    loop.outcome.attempts, loop.outcome.tool_calls = run.attempts, run.tool_calls
    loop.outcome.prompt_tokens, loop.outcome.completion_tokens = run.prompt_tokens, run.completion_tokens
    try:
        with lease_kept(run_id), run_span(run_id=run.id, agent_name=run.agent_name, actor=run.actor, model=agent.model, kind=run.kind) as span:
            finished = run_settle(run=run, loop=loop, session=session, span=span)
    except Exception as exc:  # the queue's timeout, a bug: never leave it running
        logger.exception("run %s failed in its resume", run_id)
        finished = run_finish(run_id=run_id, outcome=Outcome.failed(f"the run was interrupted: {exc}"[:2000]), session=session)
        if finished is None:
            return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""
    if finished.status in RunStatus.FINISHED:
        run_policy(finished.kind).after_resume(finished)
    return finished.status
