"""The coding turns the server and the runner both run (issue 27 item 1, issue 14 items 3 and 5).

A coding run — on the server (`coding.engine.CodingLoop`) or routed to a machine
(`runner.coding.CodingExecution`) — asks the model turn after turn with the coding tools offered
every time, runs the calls it asks for (a stop check before each; `finish` is recorded, not run),
commits after each turn that wrote files, and ends on `finish` or on a plain reply. A `finish` in
a turn whose changes were held back whole (cap, bound, credential) is not the end: the model is
told (`commits.FINISH_HELD`) and the run goes on. The algorithm is `coding_turns`, once: a
generator in the pattern of `toolkit.toolloop.tool_loop` that yields plain operations and is
sent back their results; each side performs them with its own effects (the server's completion
with failover, session events, masking and git backend; the machine's async gateway client, HTTP
event posts and local git) and drives it with `toolkit.toolloop.run_through` (the server) or
`awaited_through` (the machine).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from toolkit import commits
from toolkit.coding import FINISH, WRITING_TOOLS
from toolkit.events import valid_text
from toolkit.toolloop import Answered, AskModel, CheckStop, Reply, Said, Steer, assistant_turn, parsed_arguments, tool_turn, wire_name
from toolkit.wire import ChatRole

__all__ = ["Answered", "AskModel", "CheckStop", "CodingTool", "MakeCommit", "MeasureTree", "OutOfTurns", "PlanCommit", "RecordCall", "Reply", "Said", "Stage", "Steer", "Tell", "TreeStaysLarge",
           "coding_turns", "platform_turn"]


def platform_turn(text: str) -> dict:
    """Return the user turn in which the platform tells the model `text` ("[platform] <text>")."""
    return {"role": ChatRole.USER, "content": f"[platform] {text}"}


@dataclass
class CodingTool:
    """Run coding tool call `call` (not `finish`) of turn `turn_no`: `name`, its `raw` JSON arguments and
    their `arguments` object. Sent back: `(result text, failed)`. The side raises to end the run (a
    stop that killed the command)."""

    call: Any
    name: str
    raw: str
    arguments: dict
    turn_no: int


@dataclass
class RecordCall:
    """Count call `call` of turn `turn_no` and record it as a `tool-call` event (`result` already
    valid text; a `finish` call's is "finished"). Sent back: the event's seq, or None when none was stored."""

    call: Any
    name: str
    raw: str
    result: str
    failed: bool
    turn_no: int


@dataclass
class MeasureTree:
    """A turn that wrote files is being committed: measure the working copy. Sent back: its size in
    bytes (`commits.tree_bytes`)."""


@dataclass
class PlanCommit:
    """Read the working copy's status and plan the turn's commit (`commits.plan_turn` with the
    side's bounds and `pushed_bytes`, the bytes committed so far). Sent back: the `commits.TurnPlan`."""

    pushed_bytes: int


@dataclass
class Stage:
    """Stage `plan.stage`. Sent back: None, or why the staged changes may not be committed (a
    credential the server's scanner found: the side has unstaged them and logged the reason)."""

    plan: Any


@dataclass
class MakeCommit:
    """Commit the staged changes as `subject` with the trailers `Agents-Session` / `Agents-Turn`
    (from `seq`, the seq of the turn's last recorded tool-call event, None when none was stored,
    and `turn_no`) and record it as a `commit` event. Sent back: nothing."""

    subject: str
    seq: int | None
    turn_no: int
    plan: Any


@dataclass
class Tell:
    """Tell the model `text` (the side records it as a `log` event with `extra`); the loop has
    already added it to the messages. Sent back: nothing."""

    text: str
    extra: dict = field(default_factory=dict)


@dataclass
class TreeStaysLarge:
    """The loop's end: the working copy was over its cap at a turn's commit after the model had been told."""

    max_bytes: int

    @property
    def reason(self) -> str:
        """The run's error: "the working copy grew past N MiB and stayed there after the model was told"."""
        return f"the working copy grew past {self.max_bytes // commits.MIB} MiB and stayed there after the model was told"


@dataclass
class OutOfTurns:
    """The loop's end: `turns` turns passed without `finish` or a plain reply."""

    turns: int

    @property
    def reason(self) -> str:
        """The run's error: "the run took N turns without calling finish"."""
        return f"the run took {self.turns} turns without calling finish"


class _Bookkeeping:
    """What the commits of one run carry from turn to turn: the bytes committed, whether the model was told the tree is too large."""

    def __init__(self) -> None:
        self.committed_bytes = 0
        self.tree_warned = False


def _tell(messages: list[dict], text: str, **extra) -> Generator[Any, Any, None]:
    messages.append(platform_turn(text))
    yield Tell(text, extra)


def _commit_turn(*, content: str, finished: str | None, seq: int | None, turn_no: int, messages: list[dict],
                 bounds: commits.Bounds, books: _Bookkeeping) -> Generator[Any, Any, bool | TreeStaysLarge]:
    """Commit what a turn wrote within `bounds`; tell the model what was not. Returns True when the
    turn's changes were held back whole (cap, bound, credential), False when committed (or nothing
    to commit), `TreeStaysLarge` when the tree is still over its cap after the model was told."""
    size = yield MeasureTree()
    warning = commits.tree_warning(size, bounds)
    if warning:
        if books.tree_warned:
            return TreeStaysLarge(bounds.max_tree_bytes)
        books.tree_warned = True
        yield from _tell(messages, warning, refused="working-copy", bytes=size)
        return True
    books.tree_warned = False
    plan = yield PlanCommit(books.committed_bytes)
    if plan.refusal:
        yield from _tell(messages, plan.refusal, refused="bounds", files=[p for p, _ in plan.too_large] or [p for p, _ in plan.sizes][:20])
        return True
    if not plan.stage:
        if plan.notes:
            yield from _tell(messages, plan.notes, refused="links")
        return False
    refused = yield Stage(plan)
    if refused:
        messages.append({"role": ChatRole.USER, "content": f"The platform {refused}"})
        return True
    yield MakeCommit(commits.commit_subject(content=content, finished=finished, plan=plan), seq, turn_no, plan)
    books.committed_bytes += plan.bytes
    if plan.notes:
        yield from _tell(messages, plan.notes, refused="links", files=[p for p, _ in plan.outside_links])
    return False


def coding_turns(*, messages: list[dict], definitions: list[dict], turns: int,
                 bounds: commits.Bounds) -> Generator[Any, Any, Answered | OutOfTurns | TreeStaysLarge]:
    """The coding loop: yields `Steer`, `AskModel`, `Said`, `CheckStop`, `CodingTool`, `RecordCall`,
    `MeasureTree`, `PlanCommit`, `Stage`, `MakeCommit`, `Tell`; returns `Answered` (a plain reply's
    text, or the `finish` summary), `OutOfTurns` or `TreeStaysLarge`.

    In: the opening `messages` (extended in place), the coding tools' `definitions` (offered every
    turn), the most `turns` and the run's commit `bounds` (`toolkit.commits`: over the working-copy
    cap the model is told once and the turn not committed, still over at its next changing turn →
    `TreeStaysLarge`; a file or push bound refused, a credential refused, a link out of the working
    copy: the model is told which files and why). Each turn: steer; ask; record its text; no calls → the answer;
    else add the assistant turn and, per call, check the stop, run it (`finish` is not run: its
    result is "finished") and record it; a turn that called a writing tool is committed; a
    `finish` ends the run unless the commit held the turn's changes back (then the model is told).
    """
    books = _Bookkeeping()
    for turn_no in range(1, turns + 1):
        yield Steer(messages, round_no=turn_no)
        reply: Reply = yield AskModel(messages, definitions, turn_no)
        content = reply.content or ""
        calls = list(reply.calls)
        if content:
            yield Said(content, reply.model)
        if not calls:  # a plain answer ends the run like finish; no tool ran, so nothing changed
            return Answered(content, reply)
        messages.append(assistant_turn(content, reply.turn_calls))
        finished: str | None = None
        wrote, last_seq = False, None
        for call in calls:
            yield CheckStop()
            name = wire_name(call)
            raw = getattr(getattr(call, "function", None), "arguments", "") or ""
            arguments = parsed_arguments(raw)
            if name == FINISH:
                summary = arguments.get("summary")
                finished = summary if isinstance(summary, str) else ""
                result, failed = "finished", False
            else:
                result, failed = yield CodingTool(call, name, raw, arguments, turn_no)
                wrote = wrote or name in WRITING_TOOLS  # read-only turns cannot change the tree
            result = valid_text(result)
            seq = yield RecordCall(call, name, raw, result, bool(failed), turn_no)
            last_seq = seq if seq is not None else last_seq
            messages.append(tool_turn(getattr(call, "id", "") or "", result))
        held = False
        if wrote:
            held = yield from _commit_turn(content=content, finished=finished, seq=last_seq, turn_no=turn_no, messages=messages,
                                           bounds=bounds, books=books)
            if isinstance(held, TreeStaysLarge):
                return held
        if finished is not None and held:  # told so it can fix it: the run goes on
            yield from _tell(messages, commits.FINISH_HELD, refused="finish")
        elif finished is not None:
            return Answered(finished, reply)
    return OutOfTurns(turns)
