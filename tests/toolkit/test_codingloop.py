"""The coding turns both sides run (`toolkit.codingloop`), driven by a scripted side (pure Python: no
gateway, no git, no server)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from toolkit import commits
from toolkit.codingloop import (Answered, AskModel, CheckStop, CodingTool, MakeCommit, OutOfTurns, PlanCommit, RecordCall, Reply, Said, Stage,
                                Steer, Tell, TreeStaysLarge, coding_turns, platform_turn)
from toolkit.toolloop import awaited_through, run_through

TOOLS = [{"type": "function", "function": {"name": "write_file"}}, {"type": "function", "function": {"name": "finish"}}]


def call(call_id: str, name: str, arguments: str = "{}"):
    return SimpleNamespace(id=call_id, function=SimpleNamespace(name=name, arguments=arguments))


def reply(content, *calls):
    return Reply(content, list(calls), [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                        for c in calls], "m1")


class Stopped(Exception):
    """The fake side's stop."""


class ScriptedSide:
    """Answers the coding turns' operations from a script and writes down every one it was asked for."""

    def __init__(self, replies, *, plans=(), sizes=(), refusals=(), stop_after_calls=None):
        self.replies = list(replies)
        self.plans = list(plans)  # per PlanCommit: the plan (default: stage "a", 10 bytes)
        self.sizes = list(sizes)  # per MeasureTree: the working copy's bytes (default 1 KiB)
        self.refusals = list(refusals)  # per Stage: the credential refusal (default none)
        self.stop_after_calls = stop_after_calls
        self.ops: list = []
        self.ran: list[str] = []
        self.recorded: list[tuple] = []
        self.commits: list[MakeCommit] = []
        self.planned: list[int] = []
        self.steered: list[int] = []

    def perform(self, op):
        """Write `op` down and answer it with this side's `on_<operation>` (nothing when it has none)."""
        self.ops.append(op)
        answer = getattr(self, f"on_{type(op).__name__}", None)
        return answer(op) if answer else None

    def on_Steer(self, op: Steer):
        self.steered.append(op.round_no)
        return False

    def on_AskModel(self, op: AskModel):
        assert op.offer == TOOLS  # the tools are offered on every turn, the last one too
        return self.replies.pop(0)

    def on_CheckStop(self, op: CheckStop):
        if self.stop_after_calls is not None and len(self.recorded) >= self.stop_after_calls:
            raise Stopped("stopped between calls")

    def on_CodingTool(self, op: CodingTool):
        self.ran.append(op.call.id)
        return (f"wrote {op.arguments.get('path')}", False) if op.name == "write_file" else ("error: no such tool", True)

    def on_RecordCall(self, op: RecordCall):
        self.recorded.append((op.call.id, op.name, op.result, op.failed, op.turn_no))
        return 100 + len(self.recorded)

    def on_MeasureTree(self, op):
        return self.sizes.pop(0) if self.sizes else 1024

    def on_PlanCommit(self, op: PlanCommit):
        self.planned.append(op.pushed_bytes)
        return self.plans.pop(0) if self.plans else commits.TurnPlan(stage=["a"], added=["a"], bytes=10)

    def on_Stage(self, op: Stage):
        return self.refusals.pop(0) if self.refusals else None

    def on_MakeCommit(self, op: MakeCommit):
        self.commits.append(op)

    def kinds(self):
        return [type(op).__name__ for op in self.ops]


def run(side, turns=4):
    messages = [{"role": "system", "content": "code"}, {"role": "user", "content": "do it"}]
    return run_through(coding_turns(messages=messages, definitions=TOOLS, turns=turns, bounds=commits.Bounds()), side.perform), messages


def test_a_finish_call_ends_the_run_with_its_summary_recorded_not_run():
    side = ScriptedSide([reply("", call("c1", "finish", '{"summary": "done it"}'))])
    end, messages = run(side)
    assert isinstance(end, Answered) and end.text == "done it"
    assert side.ran == [] and side.commits == []  # finish is not a tool run, and nothing was written
    assert side.recorded == [("c1", "finish", "finished", False, 1)]
    assert messages[-1] == {"role": "tool", "tool_call_id": "c1", "content": "finished"}
    assert side.kinds() == ["Steer", "AskModel", "CheckStop", "RecordCall"]


def test_a_plain_reply_ends_the_run_with_its_text():
    side = ScriptedSide([reply("nothing to change")])
    end, messages = run(side)
    assert isinstance(end, Answered) and end.text == "nothing to change"
    assert side.kinds() == ["Steer", "AskModel", "Said"] and side.recorded == []
    assert messages[-1] == {"role": "user", "content": "do it"}  # the answer is not added to the conversation


def test_a_turn_that_wrote_files_is_committed_with_its_text_and_last_seq():
    side = ScriptedSide([reply("Add a", call("c1", "read_file"), call("c2", "write_file", '{"path": "a"}')),
                         reply("", call("c3", "finish", '{"summary": "all done"}'))])
    end, messages = run(side)
    assert isinstance(end, Answered) and end.text == "all done"
    assert side.ran == ["c1", "c2"]
    [commit] = side.commits  # the finishing turn wrote nothing: one commit
    assert (commit.subject, commit.seq, commit.turn_no) == ("Add a", 102, 1)  # the subject is the turn's words
    assert messages[2] == {"role": "assistant", "content": "Add a", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        {"id": "c2", "type": "function", "function": {"name": "write_file", "arguments": '{"path": "a"}'}}]}
    assert messages[3:5] == [{"role": "tool", "tool_call_id": "c1", "content": "error: no such tool"},
                             {"role": "tool", "tool_call_id": "c2", "content": "wrote a"}]
    assert side.recorded[0] == ("c1", "read_file", "error: no such tool", True, 1)
    assert [op for op in side.ops if isinstance(op, Said)] == [Said("Add a", "m1")]


def test_a_read_only_turn_is_not_committed():
    side = ScriptedSide([reply("", call("c1", "read_file")), reply("done")])
    end, _ = run(side)
    assert isinstance(end, Answered) and end.text == "done" and side.commits == []


def test_a_finish_in_a_turn_held_back_by_a_bound_is_told_and_the_run_goes_on():
    too_large = commits.TurnPlan(stage=["big"], added=["big"], too_large=[("big", 9 * commits.MIB)], bytes=9 * commits.MIB,
                                 bounds=commits.Bounds(max_file_bytes=commits.MIB))
    side = ScriptedSide([reply("", call("c1", "write_file", '{"path": "big"}'), call("c2", "finish", '{"summary": "x"}')),
                         reply("", call("c3", "rm", '{}'), call("c4", "write_file", '{"path": "a"}'), call("c5", "finish", '{"summary": "fixed"}'))],
                        plans=[too_large])
    end, messages = run(side)
    assert isinstance(end, Answered) and end.text == "fixed"
    tells = [op for op in side.ops if isinstance(op, Tell)]
    assert tells == [Tell(too_large.refusal, {"refused": "bounds", "files": ["big"]}), Tell(commits.FINISH_HELD, {"refused": "finish"})]
    assert messages[5:7] == [platform_turn(too_large.refusal), platform_turn(commits.FINISH_HELD)]
    assert [c.subject for c in side.commits] == ["fixed"]  # only the second turn was committed, its subject the finish summary
    assert side.steered == [1, 2] and side.planned == [0, 0]


def test_a_commit_adds_its_bytes_to_what_the_next_turn_may_push():
    side = ScriptedSide([reply("one", call("c1", "write_file", '{"path": "a"}')), reply("two", call("c2", "write_file", '{"path": "b"}')),
                         reply("done")])
    run(side)
    assert side.planned == [0, 10] and [c.subject for c in side.commits] == ["one", "two"]


def test_a_credential_refused_at_staging_is_told_and_nothing_is_committed():
    side = ScriptedSide([reply("", call("c1", "write_file", '{"path": "a"}')), reply("ok")], refusals=["refused to commit: a key"])
    end, messages = run(side)
    assert isinstance(end, Answered) and side.commits == []
    assert {"role": "user", "content": "The platform refused to commit: a key"} in messages


def test_links_out_of_the_working_copy_are_told_after_the_commit():
    plan = commits.TurnPlan(stage=["a"], added=["a"], outside_links=[("l", "/etc")], bytes=1)
    side = ScriptedSide([reply("Add a", call("c1", "write_file", '{"path": "a"}')), reply("ok")], plans=[plan])
    _, messages = run(side)
    assert len(side.commits) == 1 and plan.notes
    assert [op for op in side.ops if isinstance(op, Tell)] == [Tell(plan.notes, {"refused": "links", "files": ["l"]})]
    assert platform_turn(plan.notes) in messages


def test_a_tree_over_its_cap_is_told_once_then_ends_the_run():
    bounds = commits.Bounds()
    over = bounds.max_tree_bytes + 1
    side = ScriptedSide([reply("", call(f"c{i}", "write_file", '{"path": "a"}')) for i in range(3)], sizes=[over, over])
    end, messages = run(side)
    assert isinstance(end, TreeStaysLarge) and end.reason == f"the working copy grew past {bounds.max_tree_bytes // commits.MIB} MiB and stayed there after the model was told"
    assert side.commits == [] and side.planned == []
    assert [op.extra for op in side.ops if isinstance(op, Tell)] == [{"refused": "working-copy", "bytes": over}]


def test_a_stop_between_calls_ends_the_run_before_the_next_call():
    side = ScriptedSide([reply("", call("c1", "write_file", '{"path": "a"}'), call("c2", "write_file", '{"path": "b"}'))], stop_after_calls=1)
    with pytest.raises(Stopped):
        run(side)
    assert side.ran == ["c1"] and side.commits == []  # nothing after the stop: no second call, no commit


def test_a_run_without_finish_ends_after_its_turns():
    side = ScriptedSide([reply("", call(f"c{i}", "read_file")) for i in range(3)])
    end, _ = run(side, turns=3)
    assert isinstance(end, OutOfTurns) and end.reason == "the run took 3 turns without calling finish"
    assert side.steered == [1, 2, 3] and side.ran == ["c0", "c1", "c2"]


def test_a_finish_without_a_summary_string_ends_with_empty_text():
    side = ScriptedSide([reply("", call("c1", "finish", '{"summary": 3}'))])
    end, _ = run(side)
    assert isinstance(end, Answered) and end.text == ""


def test_the_async_driver_runs_the_same_turns():
    side = ScriptedSide([reply("", call("c1", "write_file", '{"path": "a"}')), reply("ok")])

    async def perform(op):
        return side.perform(op)

    end = asyncio.run(awaited_through(coding_turns(messages=[], definitions=TOOLS, turns=2, bounds=commits.Bounds()), perform))
    assert isinstance(end, Answered) and end.text == "ok" and side.ran == ["c1"] and len(side.commits) == 1
