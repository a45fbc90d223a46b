"""The inside of one run: prompt, completions under the retry policy, the tool loop, steering.

A step is one completion (span `agent.step`) and the tool calls it asks for (spans
`agent.tool`). Up to `AGENTS_TOOL_ROUNDS` (8) steps; the last is offered no tools. Before each
step, and once more after the model's answer, the steering commands delivered to the run's
session are applied: `pause` holds the loop until `resume` (or `stop`), `stop` ends the run as
an error "stopped by <actor>", `message` adds its text as a user turn before the next step.

The rounds are `toolkit.toolloop.tool_loop`, the one loop the runner drives too (issue 27): it
yields its operations and `RunLoop._perform` carries them out here, inside the run's steps (the
model call an `Ask`, a tool a `Blocking`, a pause a `Wait`), with this side's effects — masking,
streaming, tracing, usage, the session's events.

Every completion streams (`agents.inference`) unless the caller waits for the whole answer
(`WholeAnswer`: a request without `stream`; the gateway is then asked not streamed, issue 53),
and each piece of the reply is masked as it arrives
(`sessions.masking.StreamMasker` holds back only what could be a credential) and goes to the
listener and, as ephemeral `delta` frames, to the session's watchers. Retries and failover
happen only until the first piece has gone out; a gateway failure after that ends the run
`error` with the output written so far (what the listener heard).

A stop interrupts the step in flight (issue 25), not only between steps: the run's
`StopSignal` is set by its inbox the moment the `stop` command arrives (any process: the bus,
or the durable log's poll), which cancels the streamed completion (its socket shut down, no
retry, no failover), a running tool (a child agent run stops with it, an MCP call is
cancelled) and, in a coding run, the sandboxed command's process tree. Nothing of the
interrupted step is recorded as if completed: the reply written so far becomes the run's
output and its turn is written `incomplete` with the run's end; no tool result follows; the
run ends `error` "stopped by <actor>" with `finishReason` `stopped`. A `pause` does not
interrupt: the reply being streamed and a running command finish, and the run holds before
the next step.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from contextlib import ExitStack

from django.conf import settings
from opentelemetry import trace

from runs import tracing
from agents import inference
from agents.approval_rules import needs_approval
from agents.execution.completion import CompletionFailed, CompletionStopped, ReplySink, models_for
from agents.execution.context import fit
from runs.drive import Ask, Blocking, Steps, Wait, drive
from agents.models import Agent
from runs.models import Run
from runs.run_session import RunSession
from runs.lifecycle import Outcome, stop_reason, user_turn
from agents.tools.backends.base import ToolContext
from agents.tools.invoke import invoke_tool
from agents.tools.registry import resolve_tools
from agents_site.vocabulary import ChatRole, ControlCommand, EventKind, FinishReason, RunStatus, SessionStatus
from sessions.masking import StreamMasker
from sessions.scanner import redact_text
from toolkit.events import clip, tool_call_payload, valid_text
from toolkit.stopping import StopSignal
from toolkit.toolloop import (Answered, AskModel, CheckStop, HandsBack, NoAnswer, RefuseTool, Reply, RunTool, Said, Steer,
                              Waits, opening_messages, parsed_arguments, steps_through, tool_loop)
from toolkit.toolloop import command_text as _command_text

logger = logging.getLogger(__name__)

class RunListener:
    """What a caller hears while a run executes (a streaming response, a session's live frames).

    `delta(text)` is called with each piece of the assistant's reply as it is written (masked;
    the pieces of one reply concatenate to it); `tool(action)` after each tool call executed
    here, with the action (`{name, args, result}` or `{name, args, error}`); `ops(ops)` once
    when the round hands client-executed tool calls back (`[{name, args}]`). The default
    methods do nothing; a listener must not raise (what it raises is logged and ignored).

    `streamed`: True (the default, and a run with no listener: a worker's, whose session is
    watched live) asks the gateway streamed; `WholeAnswer` says the caller waits for the whole
    answer (a request without `stream`), and the gateway is asked not streamed (issue 53).
    """

    streamed = True

    def delta(self, text: str) -> None:
        """Hear one piece of the reply."""

    def tool(self, action: dict) -> None:
        """Hear one tool call executed here."""

    def ops(self, ops: list[dict]) -> None:
        """Hear the client-executed tool calls the round hands back."""


class WholeAnswer(RunListener):
    """The listener of a caller that waits for the whole answer (a request without `stream`): it
    hears nothing, and each completion of the run is asked of the gateway not streamed — one
    request, the usage a gateway reports only there (llama-cpp-python), and the session's watchers
    see each reply in one piece."""

    streamed = False


def reply_finish(completion) -> str:
    """Return the `FinishReason` of a completion's last reply: the gateway's `length` or
    `content_filter` passed through (a reply cut short is still an answer: the run is `ok`),
    `stop` otherwise."""
    choices = getattr(completion, "choices", None) or []
    said = getattr(choices[0], "finish_reason", None) if choices else None
    return said if said in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER) else FinishReason.STOP


class RunEnded(Exception):
    """The loop must end the run as an error with this sentence (stop, pause timeout, deadline)."""


class RunStopped(RunEnded):
    """The run's stop ended it (a `stop` command, or its parent's stop): `finishReason` `stopped`."""


class RunWaits(Exception):
    """The model's turn calls a tool the agent's approval rules name: the run suspends (issue 28).

    `calls` are every tool call of the turn, in order, each `(call, tool or None, needs)`; the
    ones that need no approval wait with the others. `round_no` is the turn's round.
    """

    def __init__(self, *, round_no: int, calls: list[tuple]) -> None:
        super().__init__("the run waits for approval")
        self.round_no = round_no
        self.calls = calls


class ResumePoint:
    """Where a resumed run carries on (`agents.execution.resume`): the conversation rebuilt from
    the session's log up to and including the waiting turn's assistant message (`messages`),
    that turn's `round_no`, and `settle(call_row)` → the tool result each of its calls gives
    the model (executing an approved call at most once)."""

    def __init__(self, *, messages: list[dict], round_no: int, rows: list, settle) -> None:
        self.messages = messages
        self.round_no = round_no
        self.rows = rows
        self.settle = settle


def compose_prompt(agent: Agent, text: str) -> list[dict]:
    """Return the opening messages: the instructions (role `AGENTS_INSTRUCTIONS_ROLE`), then the
    input trimmed as a user turn (omitted when empty; a run with neither sends one empty user
    turn). Example: instructions "Be brief", input " hi " → `[system "Be brief", user "hi"]`."""
    role = ChatRole.USER if settings.AGENTS_INSTRUCTIONS_ROLE == ChatRole.USER else ChatRole.SYSTEM
    return opening_messages(instructions=agent.instructions, text=text, instructions_role=role)


def masked(text: str) -> str:
    """Return `text` with every credential replaced by `[redacted:<rule>:<fingerprint>]`.

    A model's reply or a tool's result cannot be refused (the run must go on), so a credential
    in one is masked before it is stored, returned, published or sent back to the model.
    """
    return redact_text(text)[0] if text else text


def _masked_call(call) -> dict:
    """Return a tool call as sent back to the model, its arguments masked (the tool got them whole)."""
    dumped = call.model_dump(mode="json", exclude_none=True)
    function = dumped.get("function") or {}
    if function.get("arguments"):
        function["arguments"] = masked(function["arguments"])
    return dumped


def _wire(call) -> str:
    return getattr(getattr(call, "function", None), "name", "") or ""


def _raw(call) -> str:
    return getattr(getattr(call, "function", None), "arguments", "") or ""


class ReplyStream(ReplySink):
    """One step's reply as it streams: masked piece by piece, heard by the listener and shown on
    the session live. `start()` begins an attempt (a retry starts over, nothing was sent);
    `delivered` turns True with the first masked text sent; `finish(content)` sends the rest
    once the completion is whole; `written` is everything sent."""

    def __init__(self, say, stopped=lambda: False) -> None:
        self._say = say
        self._stopped = stopped
        self._masker = StreamMasker()
        self.delivered = False

    def start(self) -> None:
        """Begin an attempt: forget what an earlier attempt held back (it sent nothing)."""
        self._masker = StreamMasker()

    def piece(self, text: str) -> None:
        """Mask and send what may go out of this raw piece (nothing once the run is stopped)."""
        if self._stopped():
            return
        out = self._masker.feed(valid_text(text))
        if out:
            self.delivered = True
            self._say(out)

    def finish(self, content: str) -> None:
        """The reply is whole (`content`, masked): send what was held back."""
        rest = self._masker.finish()
        if rest:
            self.delivered = True
            self._say(rest)
        if self._masker.emitted != content:  # both are masked(reply): a difference is a bug to see
            logger.error("streamed reply differs from the recorded one (%d vs %d characters)", len(self._masker.emitted), len(content))

    def broke_off(self) -> str:
        """The reply broke off: drop what is held back (a half-written credential too); return what was sent."""
        self._masker.drop()
        return self._masker.emitted


class RunLoop:
    """Execute one run of `agent` on `text`; `execute()` returns its `Outcome`, never raises.

    Must run inside the org context. `deadline` (monotonic seconds) bounds a nested run called
    as a tool; None means `AGENTS_RUN_DEADLINE_SECONDS` from now (issue 31: a total run deadline). `stop` is the run's stop
    signal when the caller has one (a child run's is its parent's child); the loop sets it when
    its session receives `stop`.
    """

    def __init__(self, *, agent: Agent, text: str, run: Run, session: RunSession, org_slug: str, deadline: float | None,
                 prompt: list[dict] | None = None, client_tools: list[dict] | None = None,
                 listener: RunListener | None = None, stop: StopSignal | None = None, resume: ResumePoint | None = None):
        self.agent = agent
        self.resume = resume
        self.waiting: RunWaits | None = None
        self.text = text
        self.run = run
        self.session = session
        self.org_slug = org_slug
        self.deadline = deadline if deadline is not None else time.monotonic() + settings.AGENTS_RUN_DEADLINE_SECONDS
        self.outcome = Outcome(model=agent.model or settings.AGENTS_DEFAULT_MODEL)
        self.prompt = prompt
        self.client_tools = [tool for tool in (client_tools or []) if isinstance(tool, dict)]
        self.listener = listener or RunListener()
        self._held = False
        self.stop = stop or StopSignal()
        watch_stop(self.session, self.stop)

    def _say(self, text: str) -> None:
        self._hear("delta", text)
        self.session.delta(text, run_id=self.run.id)

    def _generation(self) -> dict:
        return {"max_tokens": self.agent.max_tokens, "temperature": self.agent.temperature, "top_p": self.agent.top_p,
                "run_id": self.run.id, "passthrough": getattr(self.agent, "gateway_options", None),
                "stream": getattr(self.listener, "streamed", True)}

    def _hear(self, method: str, value) -> None:
        try:
            getattr(self.listener, method)(value)
        except Exception:
            logger.warning("run %s: listener %s failed", self.run.id, method, exc_info=True)

    # -- steering -------------------------------------------------------------------------
    def _stopped(self) -> RunStopped:
        """Return the end of a run whose stop signal is set: "stopped by <actor>[: message]"."""
        command = self.stop.command or {}
        if command.get("parent"):
            return RunStopped("stopped with its parent run")
        actor = command.get("actor") or self.session.actor_of(command.get("seq")) or "the control plane"
        return RunStopped(stop_reason(f"stopped by {actor}", command.get("message")))

    def check_stop(self) -> None:
        """Raise the run's `RunStopped` (`_stopped`) when its stop signal is set; else return."""
        if self.stop.is_set():
            raise self._stopped()

    def _hold_status(self, held: bool) -> None:
        if held != self._held:
            self._held = held
            self.session.set_status(SessionStatus.PAUSED if held else SessionStatus.RUNNING)
            self.session.append(EventKind.LOG, {"text": "run paused" if held else "run resumed", "runId": self.run.id})

    def steer(self, messages: list[dict]) -> bool:
        """Apply the commands delivered so far; return True when user turns were added.

        Raises `RunEnded` on `stop`, when a pause outlasts `AGENTS_PAUSE_TIMEOUT_SECONDS`, or when
        the run's deadline passes while it is paused ("the run ran out of time while paused"): the
        deadline counts paused time, since the task queue's kill does. Blocks while paused (the
        sync form of `steer_steps`).
        """
        return drive(self.steer_steps(messages))

    def steer_steps(self, messages: list[dict]) -> Steps[bool]:
        """`steer` as run steps: a pause waits by yielding `Wait` (`runs.drive`)."""
        added = False
        paused = False
        paused_since = 0.0
        commands = self.session.pending()
        while True:
            for command in commands:
                verb = command.get("command")
                if verb == ControlCommand.STOP:
                    self.stop.set(command)
                    raise self._stopped()
                if verb == ControlCommand.PAUSE:
                    paused = True
                elif verb == ControlCommand.RESUME:
                    paused = False
                elif verb == ControlCommand.MESSAGE:
                    text = _command_text(command)
                    if text:
                        messages.append({"role": ChatRole.USER, "content": text})
                        added = True
            if not paused:
                break
            if not self._held:
                paused_since = time.monotonic()
                self._hold_status(True)
            if self.stop.is_set():
                raise self._stopped()
            limit = settings.AGENTS_PAUSE_TIMEOUT_SECONDS
            at = time.monotonic()
            if at >= self.deadline:
                raise RunEnded("the run ran out of time while paused")
            if at - paused_since > limit:
                raise RunEnded(f"paused for longer than {limit:g} s")
            wait = min(settings.AGENTS_CONTROL_POLL_SECONDS, self.deadline - at, paused_since + limit - at)
            command = yield Wait(self.session, max(wait, 0.01))
            commands = [command] if command else []
        self._hold_status(False)
        return added

    # -- one completion and its tools -------------------------------------------------------
    def _seconds_left(self) -> float | None:
        return None if self.deadline == math.inf else max(self.deadline - time.monotonic(), 0.001)

    def _on_retry(self, model: str, attempt: int, reason: str) -> None:
        failover = reason.startswith("failover")
        tracing_span = trace.get_current_span()
        tracing_span.add_event(
            tracing.EVENT_RETRY,
            {tracing.ATTR_ATTEMPTS: attempt, tracing.ATTR_FAILOVER: failover, "agents.retry_reason": reason[:300], tracing.ATTR_REQUEST_MODEL: model},
        )
        self.session.append(EventKind.LOG, {"text": "model failover" if failover else "model retry", "model": model, "attempt": attempt, "reason": reason[:500]})

    def _fit(self, messages: list[dict], offer: list[dict] | None, model: str) -> list[dict]:
        """Return what of `messages` fits the model's context window (`agents.execution.context`),
        noting on the session when older turns were dropped."""
        fitted = fit(messages, agent=self.agent, model=model, max_tokens=inference.output_token_cap(self.agent.max_tokens), tools=offer)
        if fitted.dropped:
            self.session.append(EventKind.LOG, {"text": f"dropped the {fitted.dropped} oldest messages to fit the context window "
                                                        f"({fitted.window} tokens; counted by {fitted.counted_by})", "runId": self.run.id})
        self._sent_bytes = len(json.dumps(fitted.messages, ensure_ascii=False).encode()) + len(json.dumps(offer or []).encode())
        return fitted.messages

    def _add_usage(self, completion) -> None:
        usage = getattr(completion, "usage", None)
        if usage is None:
            return
        inference.note_usage(self.outcome.model, getattr(self, "_sent_bytes", 0), usage.prompt_tokens)
        if usage.prompt_tokens is not None:
            self.outcome.prompt_tokens = (self.outcome.prompt_tokens or 0) + usage.prompt_tokens
        if usage.completion_tokens is not None:
            self.outcome.completion_tokens = (self.outcome.completion_tokens or 0) + usage.completion_tokens

    def _run_tool(self, call, by_wire: dict, round_no: int) -> Steps[str]:
        function = getattr(call, "function", None)
        wire_name = getattr(function, "name", "") or ""
        raw = getattr(function, "arguments", "") or ""
        tool = by_wire.get(wire_name)
        name = tool.name if tool else wire_name
        tracer = tracing.tracer()
        with tracer.start_as_current_span(tracing.SPAN_TOOL, attributes={tracing.ATTR_TOOL_NAME: name}) as span:
            if tool is not None:
                span.set_attribute(tracing.ATTR_TOOL_SOURCE, str(tool.source))
            context = ToolContext(
                org_slug=self.org_slug,
                actor=self.run.actor,
                request_id=self.run.request_id,
                run_id=self.run.id,
                session_id=self.session.session_id,
                depth=self.run.depth,
                deadline=min(self.deadline, time.monotonic() + settings.AGENTS_TOOL_CALL_TIMEOUT_SECONDS),
                stop=self.stop,
            )
            if self.stop.is_set():
                raise self._stopped()
            result, failed = yield Blocking(invoke_tool, (tool,), {"wire_name": wire_name, "raw_arguments": raw, "context": context})
            if self.stop.is_set():  # the stop interrupted the call: its result is not the tool's answer
                raise self._stopped()
            result = masked(valid_text(result))
            span.set_attribute(tracing.ATTR_TOOL_FAILED, failed)
        self.outcome.tool_calls += 1
        action = {"name": name, "args": parsed_arguments(masked(raw)), ("error" if failed else "result"): result}
        self.outcome.actions.append(action)
        self._hear("tool", action)
        self.session.append(EventKind.TOOL_CALL, tool_call_payload(
            name=name, raw_arguments=masked(raw), result=result, failed=failed, round_no=round_no,
            call_id=getattr(call, "id", "") or "", run_id=self.run.id))
        return result

    def run_call(self, call, by_wire: dict, round_no: int) -> str:
        """Execute one tool call of a resumed turn (`ResumePoint.settle` calls it once per call), here."""
        return drive(self._run_tool(call, by_wire, round_no))

    def record_call(self, call, round_no: int, *, name: str, result: str, failed: bool) -> None:
        """Record a call of a resumed turn that was not executed (denied, or interrupted and not re-run)."""
        self.session.append(EventKind.TOOL_CALL, tool_call_payload(
            name=name, raw_arguments=masked(_raw(call)), result=result, failed=failed, round_no=round_no,
            call_id=getattr(call, "id", "") or "", run_id=self.run.id))

    # -- the loop ---------------------------------------------------------------------------
    def _loop(self) -> Steps[None]:
        """Set the run up (prompt, tools, a resumed turn settled), then drive the shared tool loop
        (`toolkit.toolloop.tool_loop`) with this side's effects (`_perform`) and read its end."""
        messages = [dict(m) for m in self.prompt] if self.prompt is not None else compose_prompt(self.agent, self.text)
        resolution = resolve_tools(list(self.agent.tools or []), agent_name=self.agent.name, depth=self.run.depth)
        for name, reason in resolution.not_offered.items():
            self.session.append(EventKind.LOG, {"text": f"tool {name} not offered: {reason}", "runId": self.run.id})
        by_wire = {tool.wire_name: tool for tool in resolution.tools}
        definitions = [tool.definition() for tool in resolution.tools]
        client_names: set[str] = set()
        for tool in self.client_tools:  # the caller's own tools: offered, never executed here (first name wins)
            name = (tool.get("function") or {}).get("name")
            if name and name not in by_wire and name not in client_names:
                client_names.add(name)
                definitions.append(tool)
        self._by_wire = by_wire
        self._models = models_for(self.outcome.model)
        first_round = 1
        if self.resume is not None:  # the waiting turn's calls are answered: their results, then on
            messages = [dict(m) for m in self.resume.messages]
            for row in self.resume.rows:
                messages.append({"role": ChatRole.TOOL, "tool_call_id": row.tool_call_id, "content": self.resume.settle(self, row, by_wire)})
            first_round = self.resume.round_no + 1
        elif self.text.strip() and not getattr(self.run, "opened_here", False):  # else run_start recorded it
            self.session.append(EventKind.MESSAGE, user_turn(self.run))
        rules = getattr(self.agent, "approval", None) or {}
        self.session.prime()  # the live delta frames name the session's flow: read once, not while the model writes
        loop = tool_loop(messages=messages, definitions=definitions, rounds=max(settings.AGENTS_TOOL_ROUNDS, 1), first_round=first_round,
                         local=by_wire, client=client_names, can_wait=self.run.depth == 0, steer_after_answer=True,
                         ruled=lambda wire: wire in by_wire and needs_approval(rules, by_wire[wire].name))
        self._step: ExitStack | None = None  # the round's `agent.step` span: from its model call to its last tool call
        try:
            end = yield from steps_through(loop, self._perform)
        except BaseException:
            self._end_step(*sys.exc_info())
            raise
        self._end_step()
        if isinstance(end, Answered):
            self.outcome.status = RunStatus.OK
            self.outcome.output = end.text
            self.outcome.finish_reason = reply_finish(end.reply.raw)
        elif isinstance(end, HandsBack):  # the caller executes these: hand them back and end the round
            self.outcome.ops = [{"name": _wire(call), "args": parsed_arguments(masked(_raw(call)))} for call in end.calls]
            self._hear("ops", self.outcome.ops)
            self.session.append(EventKind.MESSAGE, {"role": ChatRole.ASSISTANT, "text": clip(end.reply.content or ""), "model": end.reply.model,
                                                    "ops": [op["name"] for op in self.outcome.ops], "runId": self.run.id}, last=True)
            self.outcome.status = RunStatus.OK
            self.outcome.output = end.reply.content or ""
            self.outcome.finish_reason = FinishReason.TOOL_CALLS
        elif isinstance(end, Waits):
            raise RunWaits(round_no=end.round_no, calls=[(call, by_wire.get(_wire(call)), need) for call, need in zip(end.calls, end.needs)])
        elif isinstance(end, NoAnswer):
            raise RunEnded(end.reason)

    def _perform(self, op) -> Steps:
        """Perform one operation of the tool loop here (see `toolkit.toolloop`); return its result."""
        if isinstance(op, Steer):
            self._end_step()
            added = yield from self.steer_steps(op.messages)
            if not op.after_answer and time.monotonic() >= self.deadline:
                raise RunEnded("the run ran out of time")
            return added
        if isinstance(op, AskModel):
            return (yield from self._ask(op))
        if isinstance(op, Said):
            if op.final:
                self._end_step()
                # The reply is held: written with the run's summary when no steering follows (one transaction).
                self.session.append(EventKind.MESSAGE, {"role": ChatRole.ASSISTANT, "text": clip(op.text), "model": op.model, "runId": self.run.id},
                                    last=True)
                self.outcome.output = op.text  # a stop arriving now keeps the whole reply as the run's output
            else:
                self.session.append(EventKind.MESSAGE, {"role": ChatRole.ASSISTANT, "text": clip(op.text), "model": op.model, "runId": self.run.id})
            return None
        if isinstance(op, CheckStop):
            return self.check_stop()
        if isinstance(op, RunTool):
            return (yield from self._run_tool(op.call, self._by_wire, op.round_no))
        if isinstance(op, RefuseTool):  # an agent called as a tool cannot wait: the call is not executed
            self.record_call(op.call, op.round_no, name=self._by_wire[_wire(op.call)].name, result=op.result, failed=True)
            return None
        raise TypeError(f"the tool loop asked for {op!r}")

    def _end_step(self, *exc_info) -> None:
        """End the round's `agent.step` span, if one is open (with the exception that ended the run, if any)."""
        step, self._step = getattr(self, "_step", None), None
        if step is not None:
            step.__exit__(*(exc_info or (None, None, None)))

    def _ask(self, op: AskModel) -> Steps[Reply]:
        """One completion of the tool loop, streamed, under its `agent.step` span; a failure keeps what was written."""
        models = self._models
        self._step = ExitStack()
        step = self._step.enter_context(tracing.tracer().start_as_current_span(
            tracing.SPAN_STEP,
            attributes={
                tracing.ATTR_ROUND: op.round_no,
                tracing.ATTR_TOOLS_DECLARED: len(self.agent.tools or []),
                tracing.ATTR_TOOLS_OFFERED: len(op.offer or []),
                tracing.ATTR_REQUEST_MODEL: models[0],
            },
            record_exception=False,
        ))
        reply = ReplyStream(self._say, self.stop.is_set)
        try:
            answered = yield Ask({"models": models, "messages": self._fit(op.messages, op.offer, models[0]), "tools": op.offer,
                                  "timeout": self._seconds_left, "on_retry": self._on_retry, "sink": reply,
                                  "generation": self._generation(), "stop": self.stop})
        except CompletionStopped as exc:
            self.outcome.attempts += exc.attempts
            self.outcome.model = exc.model
            step.set_status(trace.Status(trace.StatusCode.ERROR, "stopped"))
            self._keep_partial(reply.broke_off(), exc.model)
            raise self._stopped() from exc
        except CompletionFailed as exc:
            self.outcome.attempts += exc.attempts
            self.outcome.model = exc.model
            step.set_status(trace.Status(trace.StatusCode.ERROR, exc.reason[:200]))
            self._keep_partial(reply.broke_off(), exc.model)
            raise RunEnded(exc.reason) from exc
        step.set_attribute(tracing.ATTR_RESPONSE_MODEL, answered.model)
        self.outcome.attempts += answered.attempts
        self.outcome.model = answered.model
        if answered.failed_over:  # once failed over, the run stays on the model that answers
            self._models = models[models.index(answered.model) :]
        self._add_usage(answered.completion)
        message = answered.completion.choices[0].message
        content = masked(valid_text(message.content)) if message.content is not None else None
        calls = list(message.tool_calls or [])
        reply.finish(content or "")
        return Reply(content, calls, [_masked_call(call) for call in calls], answered.model, answered.completion)

    def _keep_partial(self, written: str, model: str) -> None:
        """A reply broke off (a failure or a stop): the run keeps what was written as its output and
        the session gets it as an `incomplete` turn, held to be written with the run's end."""
        if written:
            self.outcome.output = written
            self.session.append(EventKind.MESSAGE, {"role": ChatRole.ASSISTANT, "text": clip(written), "model": model,
                                                    "incomplete": True, "runId": self.run.id}, last=True)

    def execute(self) -> Outcome:
        """Run the loop here, blocking while the model writes; return the outcome (status `ok`
        with output, or `error` with a reason; `finish_reason` `stopped` when the run's stop ended it)."""
        return drive(self.steps())

    def steps(self) -> Steps[Outcome]:
        """The loop as run steps (`runs.drive`): returns the outcome as `execute` does,
        never raises."""
        try:
            yield from self._loop()
        except RunWaits as exc:
            self.outcome.status = RunStatus.WAITING
            self.waiting = exc
        except RunStopped as exc:
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = str(exc)
            self.outcome.finish_reason = FinishReason.STOPPED
        except RunEnded as exc:
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = str(exc)
        except Exception as exc:  # a bug must still leave an honest run record
            logger.exception("run %s failed unexpectedly", self.run.id)
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = f"internal error: {type(exc).__name__}"
        return self.outcome


def watch_stop(session: RunSession, stop: StopSignal) -> None:
    """Set `stop` the moment a `stop` command reaches `session`'s inbox, whatever the run is doing
    (the process's steering hub calls in from its own thread; issue 25)."""

    def on_command(command: dict) -> None:
        if command.get("command") == ControlCommand.STOP:
            stop.set(command)

    session.on_command(on_command)
