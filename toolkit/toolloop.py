"""The tool loop the server and the runner both run (issue 27 item 1).

A run's loop — on the server (`agents.execution.loop.RunLoop`) or routed to a machine
(`runner.execute.Execution`) — opens with the agent's instructions and the input, asks the
model up to a number of rounds, offers no tools in the last round, reads a tool call's
arguments and a steering `message` the same way, and ends the same way when the model still
asks for tools after its last round. The algorithm is `tool_loop`, once: a generator that
yields plain operations (steer, ask the model, record a turn, check the stop, run or refuse a
tool call) and is sent back their results; each side performs them with its own effects (the
server's streaming, masking and tracing inside its run steps; the machine's async gateway
client and HTTP event posts) and `steps_through` / `awaited_through` (and `run_through`) drive it.

Roles are the OpenAI chat roles (`agents_site.vocabulary.ChatRole` on the server; this package
imports nothing of it, and tests/runner/test_vocabulary_words.py ties these words to it).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection, Generator
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from toolkit.wire import ChatRole

#: The rounds a run may take when its caller names none (the server's `AGENTS_TOOL_ROUNDS` default).
DEFAULT_TOOL_ROUNDS = 8
#: A run whose model asks for tools in the last round (offered none) and writes no text ends with this error.
NO_ANSWER_AFTER_LAST_ROUND = "the model asked for tools after its last tool round and gave no answer"


def parsed_arguments(raw: str | None) -> dict:
    """Return a tool call's JSON arguments as an object; empty, malformed or non-object arguments → `{}`.

    Example: '{"q": "x"}' → {"q": "x"}; "[1]" → {}; "not json" → {}. (To refuse bad arguments to
    the model instead, `toolkit.invoke.parse_arguments` raises.)
    """
    try:
        value = json.loads(raw) if raw else {}
    except (json.JSONDecodeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def opening_messages(*, instructions: str | None, text: str | None, instructions_role: str = ChatRole.SYSTEM) -> list[dict]:
    """Return a run's opening messages: the instructions trimmed (as `instructions_role`, "system"
    or "user"), then the input trimmed as a user turn (omitted when empty; a run with neither
    sends one empty user turn).

    Example: instructions "Be brief", text " hi " → `[{"role": "system", "content": "Be brief"},
    {"role": "user", "content": "hi"}]`.
    """
    messages: list[dict] = []
    instructions = (instructions or "").strip()
    if instructions:
        messages.append({"role": instructions_role, "content": instructions})
    text = (text or "").strip()
    if text or not messages:
        messages.append({"role": ChatRole.USER, "content": text})
    return messages


def command_text(command: dict) -> str:
    """Return the user turn a steering `message` command adds: its `message`, else its `payload`
    (a string as is, any other JSON value as its JSON text), trimmed; "" adds no turn.

    Example: {"message": " go on "} → "go on"; {"payload": {"k": 1}} → '{"k": 1}'; {} → "".
    """
    text = command.get("message")
    if not text and command.get("payload") is not None:
        payload = command["payload"]
        text = payload if isinstance(payload, str) else json.dumps(payload)
    return (text or "").strip()


def offered_tools(definitions: list[dict], *, round_no: int, rounds: int) -> list[dict] | None:
    """Return the tools the model is offered in round `round_no` (1-based) of `rounds`: all of
    `definitions`, or None when there are none or this is the last round (the model must answer).

    Example: ([t], round_no=7, rounds=8) → [t]; ([t], round_no=8, rounds=8) → None.
    """
    return definitions if definitions and round_no < rounds else None


def assistant_turn(content: str | None, tool_calls: list[dict]) -> dict:
    """Return the assistant message that asked for `tool_calls` (each the call's JSON, as sent back
    to the model), its `content` "" rather than null: strict gateways (llama-cpp-python) refuse null."""
    return {"role": ChatRole.ASSISTANT, "content": content or "", "tool_calls": tool_calls}


def tool_turn(call_id: str, result: str) -> dict:
    """Return the message handing the model the `result` text of tool call `call_id`."""
    return {"role": ChatRole.TOOL, "tool_call_id": call_id, "content": result}


# -- the loop itself ---------------------------------------------------------------------------------
#
# `tool_loop` is the algorithm, once: a generator that yields what it needs done (the operations
# below) and is sent back each one's result. It holds no I/O, no clock and no Django; each side
# drives it with its own effects — the server from `agents.execution.loop.RunLoop` (inside its run
# steps: the model call an `Ask` on the event loop, a tool a `Blocking`), a machine from
# `runner.execute.Execution` (its async gateway client, its HTTP event posts). What a side raises
# while performing an operation ends the loop (the stop, a deadline, a gateway failure).

#: The result a nested run (an agent called as a tool) gets for a call its approval rules name:
#: it cannot wait for a person (its parent holds the turn), so the call is not executed.
NESTED_NOT_APPROVED = ("The tool call was not executed: it needs a person's approval, which an agent called as a tool "
                       "cannot wait for.")


@dataclass
class Steer:
    """Apply the steering commands delivered so far (stop, pause/resume, message); user turns go
    onto `messages`. Sent back: True when turns were added. `after_answer`: the steer that follows
    a final answer (a `message` then continues the run); `round_no` the round (turn) it opens, 0
    when not told. The side raises to end the run (a stop, a pause that lasted too long, the deadline)."""

    messages: list[dict]
    after_answer: bool = False
    round_no: int = 0


@dataclass
class AskModel:
    """Ask the model for round `round_no`: `messages`, offered `offer` (None: no tools). Sent back:
    a `Reply`. The side retries, streams, counts usage and keeps a partial reply when it fails."""

    messages: list[dict]
    offer: list[dict] | None
    round_no: int


@dataclass
class Reply:
    """The model's answer to an `AskModel`, as the side keeps it: `content` (None when the model
    wrote none; on the server masked), `calls` (the tool calls, objects with `id` and
    `function.name`/`function.arguments`), `turn_calls` (the calls' JSON as sent back to the model),
    `model` (the model that answered) and `raw` (anything the side wants back at the end)."""

    content: str | None
    calls: list = field(default_factory=list)
    turn_calls: list[dict] = field(default_factory=list)
    model: str = ""
    raw: Any = None


@dataclass
class Said:
    """Record the assistant's text as a session turn; `final`: the run's answer (the side keeps it
    as the run's output, so a stop arriving during the follow-up steer keeps it). Sent back: nothing."""

    text: str
    model: str
    final: bool = False


@dataclass
class CheckStop:
    """Before each tool call: the side raises when the run must stop now. Sent back: nothing."""


@dataclass
class RunTool:
    """Execute tool call `call` of round `round_no` and record it. Sent back: the result text the model gets."""

    call: Any
    round_no: int


@dataclass
class RefuseTool:
    """Record tool call `call` of round `round_no` as not executed (failed) with `result`, the text the model gets."""

    call: Any
    round_no: int
    result: str


@dataclass
class Answered:
    """The loop's end: the model answered with `text` (its reply `reply`)."""

    text: str
    reply: Reply


@dataclass
class Waits:
    """The loop's end: the turn of round `round_no` calls tools the approval rules name; nothing of
    it was executed. `calls` are every call of the turn, `needs[i]` whether call i is ruled."""

    round_no: int
    calls: list
    needs: list[bool]


@dataclass
class HandsBack:
    """The loop's end: the turn calls the caller's own tools (`calls`, in order); the calls executed
    here ran. `reply` is the turn's reply."""

    calls: list
    reply: Reply


@dataclass
class NoAnswer:
    """The loop's end: the model asked for tools in its last round and wrote no text
    (`NO_ANSWER_AFTER_LAST_ROUND`)."""

    reason: str = NO_ANSWER_AFTER_LAST_ROUND


def wire_name(call) -> str:
    """Return the tool name a call's `function.name` carries ("" when none)."""
    return getattr(getattr(call, "function", None), "name", "") or ""


def tool_loop(*, messages: list[dict], definitions: list[dict], rounds: int, first_round: int = 1,
              local: Collection[str] = (), client: Collection[str] = (), ruled: Callable[[str], bool] = lambda _name: False,
              can_wait: bool = True, steer_after_answer: bool = False) -> Generator[Any, Any, Any]:
    """The tool loop: yields `Steer`, `AskModel`, `Said`, `CheckStop`, `RunTool`, `RefuseTool`;
    returns `Answered`, `Waits`, `HandsBack`, `NoAnswer`, or None when no round is left.

    In: the opening `messages` (extended in place with the turns), the tools' `definitions`,
    `rounds` (the last offered no tools) and the `first_round` (a resumed run's next one);
    `local` the wire names executed here, `client` those the caller executes (a turn calling one
    is handed back), `ruled(wire_name)` whether a call waits for a person, `can_wait` whether this
    run can (a nested run refuses such calls instead: `NESTED_NOT_APPROVED`), and
    `steer_after_answer` whether a final answer is followed by a steer whose message continues the
    run (the server's loop; a machine's ends at the answer).

    Each round: steer; ask with the tools offered (none in the last round); a turn with tool calls
    (while tools were offered) adds the assistant turn, records its text, waits when a call is
    ruled, else runs each call (a stop check before each) and adds its result; a turn without
    (or in the last round) is the answer — or `NoAnswer` when it has calls and no text.
    """
    for round_no in range(first_round, rounds + 1):
        yield Steer(messages)
        offer = offered_tools(definitions, round_no=round_no, rounds=rounds)
        reply: Reply = yield AskModel(messages, offer, round_no)
        calls = list(reply.calls)
        if offer and any(wire_name(call) in client for call in calls):
            for call in calls:
                if wire_name(call) in local:
                    yield RunTool(call, round_no)
            return HandsBack([call for call in calls if wire_name(call) in client], reply)
        if calls and offer:
            messages.append(assistant_turn(reply.content, reply.turn_calls))
            if reply.content:
                yield Said(reply.content, reply.model)
            needs = [ruled(wire_name(call)) for call in calls]
            if any(needs) and can_wait:
                return Waits(round_no, calls, needs)
            for call, need in zip(calls, needs):
                if need:
                    yield RefuseTool(call, round_no, NESTED_NOT_APPROVED)
                    result = NESTED_NOT_APPROVED
                else:
                    yield CheckStop()
                    result = yield RunTool(call, round_no)
                messages.append(tool_turn(getattr(call, "id", "") or "", result))
            continue
        text = reply.content or ""
        if calls and not text:
            return NoAnswer()
        yield Said(text, reply.model, final=True)
        if steer_after_answer:
            followup = [{"role": ChatRole.ASSISTANT, "content": text}]
            if (yield Steer(followup, after_answer=True)) and round_no < rounds:
                messages.extend(followup)
                continue
        return Answered(text, reply)
    return None


_END = object()


def _advance(loop: Generator, result: Any) -> tuple[Any, Any]:
    """Send `result` into `loop`: return `(its next operation, None)`, or `(_END, its end)` when it returned."""
    try:
        return loop.send(result), None
    except StopIteration as done:
        return _END, done.value


def steps_through(loop: Generator, perform: Callable[[Any], Generator]) -> Generator[Any, Any, Any]:
    """Drive `loop` from a generator: `perform(op)` is itself a generator (its yields pass through
    to whoever drives this one) returning the op's result; return the loop's end. What `perform`
    raises ends the loop (it is closed) and propagates."""
    with closing(loop):
        op, end = _advance(loop, None)
        while op is not _END:
            op, end = _advance(loop, (yield from perform(op)))
        return end


def run_through(loop: Generator, perform: Callable[[Any], Any]) -> Any:
    """Drive `loop` from plain code: `perform(op)` is the op's result; return the loop's end.
    What `perform` raises ends the loop (it is closed) and propagates."""
    with closing(loop):
        op, end = _advance(loop, None)
        while op is not _END:
            op, end = _advance(loop, perform(op))
        return end


async def awaited_through(loop: Generator, perform: Callable[[Any], Awaitable]) -> Any:
    """Drive `loop` from a coroutine: `await perform(op)` is the op's result; return the loop's end.
    What `perform` raises ends the loop (it is closed) and propagates."""
    with closing(loop):
        op, end = _advance(loop, None)
        while op is not _END:
            op, end = _advance(loop, await perform(op))
        return end
