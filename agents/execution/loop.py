"""The inside of one run: prompt, completions under the retry policy, the tool loop, steering.

A step is one completion (span `agent.step`) and the tool calls it asks for (spans
`agent.tool`). Up to `AGENTS_TOOL_ROUNDS` (8) steps; the last is offered no tools. Before each
step, and once more after the model's answer, the steering commands delivered to the run's
session are applied: `pause` holds the loop until `resume` (or `stop`), `stop` ends the run as
an error "stopped by <actor>", `message` adds its text as a user turn before the next step.
"""

from __future__ import annotations

import json
import logging
import math
import time

from django.conf import settings
from opentelemetry import trace

from agents import tracing
from agents.execution.completion import CompletionFailed, complete, models_for
from agents.models import Agent, Run
from agents.run_session import RunSession, clip
from agents.runs.lifecycle import Outcome, stop_reason
from agents.tools.backends.base import ToolContext
from agents.tools.invoke import invoke_tool
from agents.tools.registry import resolve_tools
from agents_site.vocabulary import ControlCommand, EventKind, RunStatus, SessionStatus

logger = logging.getLogger(__name__)

EVENT_ARGUMENT_BYTES = 4 * 1024
EVENT_RESULT_BYTES = 4 * 1024


class RunEnded(Exception):
    """The loop must end the run as an error with this sentence (stop, pause timeout, deadline)."""


def compose_prompt(agent: Agent, text: str) -> list[dict]:
    """Return the opening messages: the instructions (role `AGENTS_INSTRUCTIONS_ROLE`), then the
    input trimmed as a user turn (omitted when empty; a run with neither sends one empty user
    turn). Example: instructions "Be brief", input " hi " → `[system "Be brief", user "hi"]`."""
    messages: list[dict] = []
    instructions = (agent.instructions or "").strip()
    if instructions:
        role = "user" if settings.AGENTS_INSTRUCTIONS_ROLE == "user" else "system"
        messages.append({"role": role, "content": instructions})
    text = (text or "").strip()
    if text or not messages:
        messages.append({"role": "user", "content": text})
    return messages


def _command_text(command: dict) -> str:
    text = command.get("message")
    if not text and command.get("payload") is not None:
        payload = command["payload"]
        text = payload if isinstance(payload, str) else json.dumps(payload)
    return (text or "").strip()


def valid_text(text: str | None) -> str:
    """Return `text` as valid UTF-8 ("" for None): a gateway may send a lone surrogate escape
    (`"\\ud800"`), which no store, event or response can encode; it becomes `?`."""
    return (text or "").encode("utf-8", "replace").decode("utf-8")


def _arguments_for_event(raw: str):
    try:
        return json.loads(raw) if len(raw.encode()) <= EVENT_ARGUMENT_BYTES else clip(raw, EVENT_ARGUMENT_BYTES)
    except json.JSONDecodeError:
        return clip(raw, EVENT_ARGUMENT_BYTES)


class RunLoop:
    """Execute one run of `agent` on `text`; `execute()` returns its `Outcome`, never raises.

    Must run inside the org context. `deadline` (monotonic seconds) bounds a nested run called
    as a tool; None means no deadline beyond the gateway's own timeouts.
    """

    def __init__(self, *, agent: Agent, text: str, run: Run, session: RunSession, org_slug: str, deadline: float | None):
        self.agent = agent
        self.text = text
        self.run = run
        self.session = session
        self.org_slug = org_slug
        self.deadline = deadline if deadline is not None else math.inf
        self.outcome = Outcome(model=agent.model or settings.AGENTS_DEFAULT_MODEL)
        self._held = False

    # -- steering -------------------------------------------------------------------------
    def _hold_status(self, held: bool) -> None:
        if held != self._held:
            self._held = held
            self.session.set_status(SessionStatus.PAUSED if held else SessionStatus.RUNNING)
            self.session.append(EventKind.LOG, {"text": "run paused" if held else "run resumed", "runId": self.run.id})

    def steer(self, messages: list[dict]) -> bool:
        """Apply the commands delivered so far; return True when user turns were added.

        Raises `RunEnded` on `stop`, or when a pause outlasts `AGENTS_PAUSE_TIMEOUT_SECONDS`.
        """
        added = False
        paused = False
        paused_since = 0.0
        commands = self.session.pending()
        while True:
            for command in commands:
                verb = command.get("command")
                if verb == ControlCommand.STOP:
                    actor = command.get("actor") or self.session.actor_of(command.get("seq")) or "the control plane"
                    raise RunEnded(stop_reason(f"stopped by {actor}", command.get("message")))
                if verb == ControlCommand.PAUSE:
                    paused = True
                elif verb == ControlCommand.RESUME:
                    paused = False
                elif verb == ControlCommand.MESSAGE:
                    text = _command_text(command)
                    if text:
                        messages.append({"role": "user", "content": text})
                        added = True
            if not paused:
                break
            if not self._held:
                paused_since = time.monotonic()
                self._hold_status(True)
            if time.monotonic() - paused_since > settings.AGENTS_PAUSE_TIMEOUT_SECONDS:
                raise RunEnded(f"paused for longer than {settings.AGENTS_PAUSE_TIMEOUT_SECONDS:g} s")
            command = self.session.wait(settings.AGENTS_CONTROL_POLL_SECONDS)
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

    def _add_usage(self, completion) -> None:
        usage = getattr(completion, "usage", None)
        if usage is None:
            return
        if usage.prompt_tokens is not None:
            self.outcome.prompt_tokens = (self.outcome.prompt_tokens or 0) + usage.prompt_tokens
        if usage.completion_tokens is not None:
            self.outcome.completion_tokens = (self.outcome.completion_tokens or 0) + usage.completion_tokens

    def _run_tool(self, call, by_wire: dict, round_no: int) -> str:
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
            )
            result, failed = invoke_tool(tool, wire_name=wire_name, raw_arguments=raw, context=context)
            result = valid_text(result)
            span.set_attribute(tracing.ATTR_TOOL_FAILED, failed)
        self.outcome.tool_calls += 1
        self.session.append(
            EventKind.TOOL_CALL,
            {
                "name": name,
                "arguments": _arguments_for_event(raw),
                "result": clip(result, EVENT_RESULT_BYTES),
                "error": failed,
                "round": round_no,
                "runId": self.run.id,
            },
        )
        return result

    # -- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        messages = compose_prompt(self.agent, self.text)
        resolution = resolve_tools(list(self.agent.tools or []), agent_name=self.agent.name, depth=self.run.depth)
        for name, reason in resolution.not_offered.items():
            self.session.append(EventKind.LOG, {"text": f"tool {name} not offered: {reason}", "runId": self.run.id})
        by_wire = {tool.wire_name: tool for tool in resolution.tools}
        definitions = [tool.definition() for tool in resolution.tools]
        models = models_for(self.outcome.model)
        if self.text.strip():
            self.session.append(EventKind.MESSAGE, {"role": "user", "text": clip(self.text), "runId": self.run.id})
        rounds = max(settings.AGENTS_TOOL_ROUNDS, 1)
        tracer = tracing.tracer()
        for round_no in range(1, rounds + 1):
            self.steer(messages)
            if time.monotonic() >= self.deadline:
                raise RunEnded("the run ran out of time")
            offer = definitions if definitions and round_no < rounds else None
            with tracer.start_as_current_span(
                tracing.SPAN_STEP,
                attributes={
                    tracing.ATTR_ROUND: round_no,
                    tracing.ATTR_TOOLS_DECLARED: len(self.agent.tools or []),
                    tracing.ATTR_TOOLS_OFFERED: len(offer or []),
                    tracing.ATTR_REQUEST_MODEL: models[0],
                },
                record_exception=False,
            ) as step:
                try:
                    answered = complete(models=models, messages=messages, tools=offer, timeout=self._seconds_left, on_retry=self._on_retry)
                except CompletionFailed as exc:
                    self.outcome.attempts += exc.attempts
                    self.outcome.model = exc.model
                    step.set_status(trace.Status(trace.StatusCode.ERROR, exc.reason[:200]))
                    raise RunEnded(exc.reason) from exc
                step.set_attribute(tracing.ATTR_RESPONSE_MODEL, answered.model)
                self.outcome.attempts += answered.attempts
                self.outcome.model = answered.model
                if answered.failed_over:  # once failed over, the run stays on the model that answers
                    models = models[models.index(answered.model) :]
                self._add_usage(answered.completion)
                message = answered.completion.choices[0].message
                content = valid_text(message.content) if message.content is not None else None
                calls = list(message.tool_calls or [])
                if calls and offer:
                    messages.append(
                        {
                            "role": "assistant",
                            "content": content,
                            "tool_calls": [call.model_dump(mode="json", exclude_none=True) for call in calls],
                        }
                    )
                    if content:
                        self.session.append(EventKind.MESSAGE, {"role": "assistant", "text": clip(content), "model": answered.model, "runId": self.run.id})
                    for call in calls:
                        result = self._run_tool(call, by_wire, round_no)
                        messages.append({"role": "tool", "tool_call_id": getattr(call, "id", ""), "content": result})
                    continue
            text = content or ""
            if calls and not text:
                raise RunEnded("the model asked for tools after its last tool round and gave no answer")
            self.session.append(EventKind.MESSAGE, {"role": "assistant", "text": clip(text), "model": answered.model, "runId": self.run.id})
            followup = [{"role": "assistant", "content": text}]
            if self.steer(followup) and round_no < rounds:
                messages.extend(followup)
                continue
            self.outcome.status = RunStatus.OK
            self.outcome.output = text
            return

    def execute(self) -> Outcome:
        """Run the loop; return the outcome (status `ok` with output, or `error` with a reason)."""
        try:
            self._loop()
        except RunEnded as exc:
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = str(exc)
        except Exception as exc:  # a bug must still leave an honest run record
            logger.exception("run %s failed unexpectedly", self.run.id)
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = f"internal error: {type(exc).__name__}"
        return self.outcome
