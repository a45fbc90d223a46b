"""Execute one routed run on this machine: the agent's loop against the machine's own gateway.

In: the claimed run (`runId`, `sessionId`, `agent {name, model, instructions, tools}`, `input`,
and optional `instructionsRole`, `toolRounds`, `toolCallTimeoutSeconds`, `timeoutSeconds`).
It carries no credential: inference uses this machine's `INFERENCE_BASE_URL` and
`INFERENCE_API_KEY`. Out: the report body `{status, output|error, model, promptTokens,
completionTokens, toolCalls, durationMs}` plus `finishReason` and `stoppedCommand` for a stopped run.

The loop is the server's run loop — one algorithm, `toolkit.toolloop.tool_loop`, driven here
with this machine's effects (`Execution._perform`):
instructions then the input; up to `toolRounds` (8) steps, the last offered no tools; a
`message` command's text as a user turn. 429, 5xx, connection errors and empty answers are
retried 3 times with the server's equal-jitter backoff (`toolkit.retry`); 30 s per tool call. Each step is appended to the run's
session as an event shaped as the server shapes its own (`toolkit.events`: a tool-call event
holds the whole arguments and result, cut to 4 KiB previews only past the event budget). Between steps it applies the session's steering commands (stop,
pause/resume, message) and the daemon's own stop (SIGTERM), which end the run as an error.
While a model call or a tool call runs, the session's control channel is read every
`WATCH_POLL_SECONDS` (issue 25): a `stop` cancels the call at once (the gateway request is
closed, a command's whole process tree killed) and the run reports `error` with
`finishReason` `stopped` and, for a killed command, `stoppedCommand` `{name, command, output}`
(what it printed so far; no tool result and no event is posted for it, so after the stop the
session gets only the run's end); other commands read meanwhile wait for the next step.

Approvals (issue 28 item 7): a model turn calling a tool the claim's `approval` rules name (the
shared matcher, `toolkit.approval`) executes none of its calls; the run reports `waiting` with
the turn, `{round, calls: [{toolCallId, name, arguments}]}`, after posting its steps so far. The
server suspends it and this machine keeps nothing of it. A claim answering `resume` continues
such a run: the conversation the server rebuilt from the session's log, the turn's calls
(approved ones executed here once, denied ones handed to the model with the reason), the control
cursor and the usage so far (`Execution._resumed`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import openai
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt

from runner.client import ServerClient
from toolkit.approval import needs_approval
from toolkit.events import clip, stopped_command, tool_call_payload, valid_text
from toolkit.invoke import Tool, invoke
from toolkit.retry import MODEL_ATTEMPTS, RETRY_BASE_SECONDS, RETRY_MAX_SECONDS, wait_equal_jitter
from toolkit.sandbox import CommandCancelled
from toolkit.toolloop import (DEFAULT_TOOL_ROUNDS, Answered, AskModel, CheckStop, NoAnswer, Reply, RunTool, Said, Steer, Waits, awaited_through,
                              command_text, opening_messages, parsed_arguments, tool_loop, tool_turn)
from toolkit.wire import ChatRole, ControlCommand, EventKind, FinishReason, RunStatus, SessionStatus

logger = logging.getLogger(__name__)

OK, ERROR, WAITING = RunStatus.OK, RunStatus.ERROR, RunStatus.WAITING  # the server's run statuses, as its report route reads them
PAUSE_POLL_SECONDS = 1.0
WATCH_POLL_SECONDS = 0.5  # how often the control channel is read while a model call or command runs
STOPPED = FinishReason.STOPPED  # the server's FinishReason of a run its stop ended


class EmptyAnswer(Exception):
    """The gateway answered 200 with no choices (retried like a busy answer)."""


class RunEnded(Exception):
    """The run must end as an error with this sentence."""


class RunWaits(Exception):
    """The model's turn calls a tool the agent's approval rules name: the run is reported `waiting` (issue 28)."""

    def __init__(self, *, round_no: int, calls: list) -> None:
        super().__init__("the run waits for approval")
        self.round_no = round_no
        self.calls = calls


class RunStopped(RunEnded):
    """The session's stop ended the run (reported with `finishReason` `stopped`); `command` is the stop."""

    def __init__(self, reason: str, command: dict | None = None) -> None:
        super().__init__(reason)
        self.command = command or {}


def _retryable(exc: BaseException) -> bool:
    if isinstance(exc, (EmptyAnswer, openai.APIConnectionError, openai.RateLimitError)):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


@dataclass
class RoutedRun:
    """A claimed run, read from the claim's answer."""

    run_id: str
    session_id: str
    agent_name: str
    model: str
    instructions: str
    tools: list[str]
    input: str
    instructions_role: str = ChatRole.SYSTEM
    tool_rounds: int = DEFAULT_TOOL_ROUNDS
    tool_call_timeout: float = 30.0
    timeout_seconds: float = 600.0
    approval: dict = field(default_factory=dict)  # the agent's approval rules: `{tools: [name or prefix*]}`
    resume: dict | None = None  # a run resumed after its approvals were answered (see `Execution._resumed`)

    @classmethod
    def parse(cls, body: dict) -> RoutedRun:
        """Build from the claim's JSON; unknown fields are ignored."""
        agent = body.get("agent") or {}
        return cls(
            run_id=str(body.get("runId") or ""),
            session_id=str(body.get("sessionId") or ""),
            agent_name=str(agent.get("name") or ""),
            model=str(agent.get("model") or ""),
            instructions=str(agent.get("instructions") or ""),
            tools=[str(t) for t in agent.get("tools") or []],
            input=str(body.get("input") or ""),
            instructions_role=ChatRole.USER if body.get("instructionsRole") == ChatRole.USER else ChatRole.SYSTEM,
            tool_rounds=max(int(body.get("toolRounds") or DEFAULT_TOOL_ROUNDS), 1),
            tool_call_timeout=float(body.get("toolCallTimeoutSeconds") or 30),
            timeout_seconds=float(body.get("timeoutSeconds") or 600),
            approval=body.get("approval") if isinstance(body.get("approval"), dict) else {},
            resume=body.get("resume") if isinstance(body.get("resume"), dict) else None,
        )


@dataclass
class Outcome:
    """What the loop produced; `report()` is the report route's body."""

    status: str = ERROR
    output: str = ""
    error: str = ""
    model: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tool_calls: int = 0
    finish_reason: str = ""
    stopped_command: dict | None = None  # a command a stop killed: {name, command, output so far}
    waiting: dict | None = None  # the turn that waits for a person: {round, calls: [{toolCallId, name, arguments}]}
    started: float = field(default_factory=time.monotonic)

    def report(self) -> dict:
        extra = {"finishReason": self.finish_reason} if self.finish_reason else {}
        if self.stopped_command is not None:
            extra["stoppedCommand"] = self.stopped_command
        if self.status == WAITING and self.waiting is not None:
            extra["waiting"] = self.waiting
        return {**extra,
            "status": self.status,
            "output": self.output if self.status == OK else "",
            "error": self.error if self.status != OK else "",
            "model": self.model,
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "toolCalls": self.tool_calls,
            "durationMs": int((time.monotonic() - self.started) * 1000),
        }


class Execution:
    """One routed run's loop on this machine (`await Execution(...).execute()` → report body)."""

    def __init__(self, run: RoutedRun, *, server: ServerClient, inference: openai.AsyncOpenAI | None, tools: dict[str, Tool],
                 stopping: asyncio.Event, model_override: str = "") -> None:
        self.run = run
        self.server = server
        self.inference = inference
        self.tools = tools
        self.stopping = stopping
        self.model = model_override or run.model
        self.outcome = Outcome(model=self.model)
        self.cursor = 0
        if run.resume is not None:  # the usage before the wait carries on; commands before it were applied
            usage = run.resume.get("usage") or {}
            self.outcome.prompt_tokens = int(usage.get("promptTokens") or 0)
            self.outcome.completion_tokens = int(usage.get("completionTokens") or 0)
            self.outcome.tool_calls = int(usage.get("toolCalls") or 0)
            self.cursor = int(run.resume.get("cursor") or 0)
        self.deadline = time.monotonic() + run.timeout_seconds
        self.pending: list[dict] = []
        self.held: list[dict] = []  # commands read while a call ran, applied at the next step
        self.stop_command: dict | None = None
        self.offered: dict[str, Tool] = {}  # the claim's tools this machine has (set when the loop starts)

    async def event(self, kind: str, payload: dict) -> None:
        """Queue one event for the run's session; `flush` posts what is queued (best effort)."""
        self.pending.append({"kind": kind, "payload": {**payload, "runId": self.run.run_id}})

    async def flush(self) -> None:
        """Post the queued events in one request (a batch when there are several).

        Called before anything that waits (the model, a tool, a pause, the report), so the
        session shows each step as soon as it happened and turns made together travel together.
        """
        events, self.pending = self.pending, []
        if events:
            await self.server.append_events(session_id=self.run.session_id, events=events)

    async def execute(self) -> dict:
        """Run the loop; return the report body. Never raises (a failure is an `error` report).

        When the daemon cancels it (its stop grace passed), the cancellation is handled here:
        the task is un-cancelled so the steps queued so far are still posted before the report
        (a killed command's output travels in the report, `stoppedCommand`).
        """
        try:
            if self.inference is None:
                raise RunEnded("inference is not configured on this machine (INFERENCE_BASE_URL)")
            await self._loop()
        except RunWaits as exc:  # nothing of the turn was executed: a person answers, then a claim resumes it
            self.outcome.status = WAITING
            self.outcome.waiting = {"round": exc.round_no, "calls": [
                {"toolCallId": call.id, "name": call.function.name or "", "arguments": call.function.arguments or ""} for call in exc.calls]}
        except RunStopped as exc:
            self.outcome.status, self.outcome.error, self.outcome.finish_reason = ERROR, str(exc), STOPPED
        except RunEnded as exc:
            self.outcome.status, self.outcome.error = ERROR, str(exc)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.outcome.status, self.outcome.error = ERROR, "the runner stopped before the run finished"
        except Exception as exc:  # the machine must always report: an unknown failure is an error
            logger.exception("run %s failed", self.run.run_id)
            self.outcome.status, self.outcome.error = ERROR, f"{exc.__class__.__name__}: {exc}"
        await self.flush()
        return self.outcome.report()

    def record_stop(self, tool: str, stopped: CommandCancelled, raw_arguments: str = "") -> None:
        """Keep a command killed by a stop for the report: `stoppedCommand` `{name, command, output}`
        (what it printed so far, clipped), never a tool result and never an event of its own —
        after the stop the session holds only the run's end, where the server records it masked
        (issue 25 item 2)."""
        self.outcome.stopped_command = stopped_command(name=tool, command=valid_text(_command_of(raw_arguments)),
                                                       output=valid_text(stopped.result.output))

    # -- steering ---------------------------------------------------------------------------
    def _check_stop(self) -> None:
        if self.stopping.is_set():
            raise RunEnded("the runner stopped (SIGTERM) before the run finished")
        if time.monotonic() >= self.deadline:
            raise RunEnded("the run ran out of time")

    async def _steer(self, messages: list[dict]) -> bool:
        """Apply the session's new steering commands; hold while paused. Return True when user turns were added."""
        paused = added = False
        while True:
            self._check_stop()
            fetched, self.cursor = await self.server.control(session_id=self.run.session_id, after=self.cursor)
            commands, self.held = [*self.held, *fetched], []
            for command in commands:
                verb = command.get("command")
                if verb == ControlCommand.STOP:
                    raise _stopped(command)
                if verb == ControlCommand.MESSAGE:
                    text = command_text(command)
                    if text:  # a message with no text adds no turn, as on the server
                        messages.append({"role": ChatRole.USER, "content": text})
                        added = True
                        await self.event(EventKind.MESSAGE, {"role": ChatRole.USER, "text": clip(text), "steered": True})
                elif verb == ControlCommand.PAUSE and not paused:
                    paused = True
                    await self.server.set_session_status(session_id=self.run.session_id, status=SessionStatus.PAUSED)
                    await self.event(EventKind.LOG, {"text": "run paused"})
                elif verb == ControlCommand.RESUME and paused:
                    paused = False
                    await self.server.set_session_status(session_id=self.run.session_id, status=SessionStatus.RUNNING)
                    await self.event(EventKind.LOG, {"text": "run resumed"})
            await self.flush()
            if not paused:
                return added
            try:
                await asyncio.wait_for(self.stopping.wait(), PAUSE_POLL_SECONDS)
            except asyncio.TimeoutError:
                pass

    async def _watch(self, task: asyncio.Future) -> None:
        """Read the control channel every `WATCH_POLL_SECONDS` until `task` is done; cancel it on `stop`."""
        while not task.done():
            await asyncio.sleep(WATCH_POLL_SECONDS)
            fetched, self.cursor = await self.server.control(session_id=self.run.session_id, after=self.cursor)
            for command in fetched:
                if command.get("command") == ControlCommand.STOP and self.stop_command is None:
                    self.stop_command = command
                    task.cancel()
                else:
                    self.held.append(command)
            if self.stop_command is not None:
                return

    async def _watched(self, work):
        """Await coroutine `work` while watching the session's control channel (issue 25).

        A `stop` read meanwhile cancels it (the model request is closed, a command's tree is
        killed) and raises `RunStopped`; the daemon's own cancellation passes through unchanged.
        """
        task = asyncio.ensure_future(work)
        watcher = asyncio.ensure_future(self._watch(task))
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self.stop_command is not None and not (current is not None and current.cancelling()):
                raise _stopped(self.stop_command) from None
            raise
        finally:
            watcher.cancel()
            try:
                await watcher
            except BaseException:  # its own cancellation, or a poll that failed: the call's outcome stands
                pass

    # -- inference ----------------------------------------------------------------------------
    async def _complete(self, messages: list[dict], tools: list[dict] | None):
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(_retryable),
            stop=stop_after_attempt(MODEL_ATTEMPTS),
            wait=wait_equal_jitter(base=RETRY_BASE_SECONDS, cap=RETRY_MAX_SECONDS),
            reraise=True,
        ):
            with attempt:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise RunEnded("the run ran out of time")
                kwargs = {"model": self.model, "messages": messages, "timeout": left}
                if tools:
                    kwargs["tools"] = tools
                completion = await self.inference.chat.completions.create(**kwargs)
                if not completion.choices:
                    raise EmptyAnswer("the gateway answered with no choices")
                return completion

    async def _answer(self, messages: list[dict], tools: list[dict] | None):
        await self.flush()
        try:
            completion = await self._watched(self._complete(messages, tools))
        except (RunEnded, asyncio.CancelledError):
            raise
        except EmptyAnswer as exc:
            raise RunEnded(f"model {self.model}: {exc}") from exc
        except openai.APIStatusError as exc:
            raise RunEnded(f"model {self.model}: the gateway answered {exc.status_code}: {exc.message}") from exc
        except openai.OpenAIError as exc:
            raise RunEnded(f"model {self.model}: {exc.__class__.__name__}: {exc}") from exc
        self.outcome.model = completion.model or self.model
        if completion.usage is not None:
            self.outcome.prompt_tokens += completion.usage.prompt_tokens or 0
            self.outcome.completion_tokens += completion.usage.completion_tokens or 0
        return completion.choices[0].message

    # -- the loop -----------------------------------------------------------------------------
    async def _resumed(self, offered: dict[str, Tool]) -> tuple[list[dict], int]:
        """Return the conversation of a resumed run with its waiting turn settled, and the next round.

        The claim's `resume` (issue 28): `messages` rebuilt by the server from the session's log, up
        to the assistant turn that asked; `calls` of that turn in order — `execute: true` with the
        `arguments` to run (a person may have edited them; the server marked the call started, so
        it runs here once), else the `result` the model gets (the denial and its reason)."""
        resume = self.run.resume or {}
        messages = [dict(m) for m in resume.get("messages") or []]
        round_no = int(resume.get("round") or 1)
        for call in resume.get("calls") or []:
            call_id, name = str(call.get("toolCallId") or ""), str(call.get("name") or "")
            if call.get("execute"):
                function = SimpleNamespace(name=name, arguments=str(call.get("arguments") or ""))
                result = valid_text(await self._tool(SimpleNamespace(id=call_id, function=function), offered, round_no))
            else:
                result = valid_text(str(call.get("result") or ""))
                await self.event(EventKind.TOOL_CALL, tool_call_payload(name=name, raw_arguments=str(call.get("arguments") or ""), result=result,
                                                                failed=True, round_no=round_no, call_id=call_id, run_id=self.run.run_id))
            messages.append(tool_turn(call_id, result))
        return messages, round_no + 1

    async def _loop(self) -> None:
        """Set the run up (opening or resumed turn), then drive the shared tool loop
        (`toolkit.toolloop.tool_loop`) with this machine's effects (`_perform`) and read its end."""
        offered = {name: self.tools[name] for name in self.run.tools if name in self.tools}
        if self.run.resume is not None:
            messages, first_round = await self._resumed(offered)
        else:
            messages, first_round = opening_messages(instructions=self.run.instructions, text=self.run.input,
                                                     instructions_role=self.run.instructions_role), 1
            for name in self.run.tools:
                if name not in offered:
                    await self.event(EventKind.LOG, {"text": f"tool {name} not offered: this machine has no such tool"})
            if self.run.input.strip():
                await self.event(EventKind.MESSAGE, {"role": ChatRole.USER, "text": clip(self.run.input)})
        self.offered = offered
        loop = tool_loop(messages=messages, definitions=[tool.definition() for tool in offered.values()], rounds=self.run.tool_rounds,
                         first_round=first_round, local=offered, ruled=lambda name: needs_approval(self.run.approval, name))
        end = await awaited_through(loop, self._perform)
        if isinstance(end, Waits):  # every call of the turn waits with the ruled ones
            raise RunWaits(round_no=end.round_no, calls=end.calls)
        if isinstance(end, NoAnswer):
            raise RunEnded(end.reason)
        if isinstance(end, Answered):
            self.outcome.status, self.outcome.output = OK, end.text

    async def _perform(self, op):
        """Perform one operation of the tool loop on this machine (see `toolkit.toolloop`); return its result."""
        if isinstance(op, Steer):
            return await self._steer(op.messages)
        if isinstance(op, AskModel):
            message = await self._answer(op.messages, op.offer)
            calls = list(message.tool_calls or [])
            return Reply(valid_text(message.content) if message.content is not None else None, calls,
                         [call.model_dump(mode="json", exclude_none=True) for call in calls], self.outcome.model)
        if isinstance(op, Said):
            await self.event(EventKind.MESSAGE, {"role": ChatRole.ASSISTANT, "text": clip(op.text), "model": op.model})
            return None
        if isinstance(op, CheckStop):
            self._check_stop()
            return None
        if isinstance(op, RunTool):
            return valid_text(await self._tool(op.call, self.offered, op.round_no))
        raise TypeError(f"the tool loop asked for {op!r}")  # a machine's run hands nothing back and can always wait

    async def _tool(self, call, offered: dict[str, Tool], round_no: int) -> str:
        name = call.function.name or ""
        raw = call.function.arguments or ""
        call_id = getattr(call, "id", "") or ""
        timeout = max(min(self.run.tool_call_timeout, self.deadline - time.monotonic()), 0.1)
        await self.flush()

        async def call():
            try:
                return await invoke(offered.get(name), name=name, raw_arguments=raw, timeout=timeout)
            except CommandCancelled as stopped:
                self.record_stop(name, stopped, raw)
                raise

        result, failed = await self._watched(call())
        self.outcome.tool_calls += 1
        await self.event(EventKind.TOOL_CALL, tool_call_payload(name=name, raw_arguments=raw, result=valid_text(result), failed=failed, round_no=round_no,
                                                        call_id=call_id, run_id=self.run.run_id))
        return result


def _command_of(raw_arguments: str) -> str:
    """Return the `command` argument of a tool call's raw JSON arguments ("" when there is none)."""
    command = parsed_arguments(raw_arguments).get("command")
    return command if isinstance(command, str) else ""


def _stopped(command: dict) -> RunStopped:
    """Return the end of a run stopped by `command`: "stopped: <message>" (a default without one)."""
    return RunStopped("stopped: " + (command.get("message") or "a stop command was posted to the session"), command)
