"""The tool loop both sides run (`toolkit.toolloop`): its rules, and the loop driven by a scripted side."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from toolkit.toolloop import (NESTED_NOT_APPROVED, NO_ANSWER_AFTER_LAST_ROUND, Answered, AskModel, CheckStop, HandsBack, NoAnswer, RefuseTool, Reply,
                              RunTool, Said, Steer, Waits, assistant_turn, awaited_through, command_text, offered_tools, opening_messages,
                              parsed_arguments, steps_through, tool_loop, tool_turn)


def test_the_opening_is_the_instructions_then_the_input_trimmed():
    assert opening_messages(instructions=" Be brief ", text=" hi ") == [{"role": "system", "content": "Be brief"},
                                                                         {"role": "user", "content": "hi"}]
    assert opening_messages(instructions="Be brief", text="", instructions_role="user") == [{"role": "user", "content": "Be brief"}]
    assert opening_messages(instructions=None, text="  ") == [{"role": "user", "content": ""}]


def test_the_last_round_offers_no_tools():
    tools = [{"type": "function", "function": {"name": "t"}}]
    assert offered_tools(tools, round_no=7, rounds=8) == tools
    assert offered_tools(tools, round_no=8, rounds=8) is None
    assert offered_tools([], round_no=1, rounds=8) is None
    assert offered_tools(tools, round_no=1, rounds=1) is None


def test_arguments_that_are_not_an_object_read_as_none():
    assert parsed_arguments('{"q": "x"}') == {"q": "x"}
    assert parsed_arguments("[1]") == {} and parsed_arguments("nope") == {} and parsed_arguments("") == {} and parsed_arguments(None) == {}


def test_a_steering_message_is_its_text_or_its_payload():
    assert command_text({"message": " go on "}) == "go on"
    assert command_text({"payload": {"k": 1}}) == '{"k": 1}'
    assert command_text({"payload": " raw "}) == "raw"
    assert command_text({}) == "" and command_text({"payload": None}) == ""


def test_the_turns_sent_back_to_the_model():
    calls = [{"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}]
    assert assistant_turn(None, calls) == {"role": "assistant", "content": "", "tool_calls": calls}
    assert tool_turn("c1", "4") == {"role": "tool", "tool_call_id": "c1", "content": "4"}


# -- the loop itself, driven by a scripted side (pure Python: no gateway, no server, no event loop) --------------

TOOLS = [{"type": "function", "function": {"name": "calc"}}, {"type": "function", "function": {"name": "deploy"}}]


def call(call_id: str, name: str, arguments: str = "{}"):
    return SimpleNamespace(id=call_id, function=SimpleNamespace(name=name, arguments=arguments))


def reply(content, *calls) -> Reply:
    return Reply(content, list(calls), [{"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
                                        for c in calls], "m1")


class Stopped(Exception):
    """The fake side's stop."""


class ScriptedSide:
    """Answers the loop's operations from a script and writes down every one it was asked for."""

    def __init__(self, replies, *, steering=None, stop_after_calls=None):
        self.replies = list(replies)
        self.steering = list(steering or [])  # per Steer: the user texts it adds
        self.stop_after_calls = stop_after_calls
        self.ops: list = []
        self.asked: list[AskModel] = []
        self.ran: list[str] = []

    def perform(self, op):
        self.ops.append(op)
        if isinstance(op, Steer):
            texts = self.steering.pop(0) if self.steering else []
            op.messages.extend({"role": "user", "content": text} for text in texts)
            return bool(texts)
        if isinstance(op, AskModel):
            self.asked.append(AskModel([dict(m) for m in op.messages], op.offer, op.round_no))
            return self.replies.pop(0)
        if isinstance(op, CheckStop):
            if self.stop_after_calls is not None and len(self.ran) >= self.stop_after_calls:
                raise Stopped("stopped between calls")
            return None
        if isinstance(op, RunTool):
            self.ran.append(op.call.id)
            return f"result of {op.call.id}"
        return None

    def steps(self, op):
        return self.perform(op)
        yield  # a generator, as the server's steps are

    def kinds(self):
        return [type(op).__name__ for op in self.ops]


def run(side, **kwargs):
    messages = [{"role": "user", "content": "hi"}]
    loop = tool_loop(messages=messages, definitions=TOOLS, local={"calc", "deploy"}, **{"rounds": 3, **kwargs})
    driven = steps_through(loop, side.steps)
    try:
        while True:
            next(driven)  # the scripted side never waits: nothing is yielded through
    except StopIteration as done:
        return done.value, messages


def test_an_answer_in_round_one_ends_the_loop():
    side = ScriptedSide([reply("4")])
    end, messages = run(side)
    assert isinstance(end, Answered) and end.text == "4" and end.reply.model == "m1"
    assert side.kinds() == ["Steer", "AskModel", "Said"]
    assert side.ops[2] == Said("4", "m1", final=True)
    assert side.asked[0].offer == TOOLS and side.asked[0].round_no == 1
    assert messages == [{"role": "user", "content": "hi"}]  # the answer is the run's output, not a turn sent back


def test_a_tool_round_then_the_answer():
    side = ScriptedSide([reply("let me", call("c1", "calc", '{"e": "2+2"}')), reply("4")])
    end, messages = run(side)
    assert isinstance(end, Answered) and end.text == "4"
    assert side.kinds() == ["Steer", "AskModel", "Said", "CheckStop", "RunTool", "Steer", "AskModel", "Said"]
    assert side.ops[2] == Said("let me", "m1", final=False)
    assert side.ran == ["c1"]
    assert messages[1]["role"] == "assistant" and messages[1]["content"] == "let me" and messages[1]["tool_calls"][0]["id"] == "c1"
    assert messages[2] == {"role": "tool", "tool_call_id": "c1", "content": "result of c1"}
    assert side.asked[1].messages == messages and side.asked[1].round_no == 2


def test_the_last_round_offers_no_tools_and_its_text_is_the_answer():
    side = ScriptedSide([reply(None, call("c1", "calc")), reply("", call("c2", "calc")), reply("done", call("c3", "calc"))])
    end, _ = run(side)
    assert [asked.offer for asked in side.asked] == [TOOLS, TOOLS, None]
    assert isinstance(end, Answered) and end.text == "done"
    assert side.ran == ["c1", "c2"]  # the last round's call is not executed
    assert "Said" not in side.kinds()[:-1]  # a turn with no text records no message


def test_tool_calls_in_the_last_round_without_text_end_with_no_answer():
    side = ScriptedSide([reply(None, call("c1", "calc"))])
    end, messages = run(side, rounds=1)
    assert side.asked[0].offer is None
    assert isinstance(end, NoAnswer) and end.reason == NO_ANSWER_AFTER_LAST_ROUND
    assert side.ran == [] and side.kinds() == ["Steer", "AskModel"] and len(messages) == 1


def test_a_ruled_call_waits_and_nothing_of_the_turn_runs():
    side = ScriptedSide([reply("", call("c1", "calc"), call("c2", "deploy"))])
    end, messages = run(side, ruled=lambda name: name == "deploy")
    assert isinstance(end, Waits) and end.round_no == 1 and [c.id for c in end.calls] == ["c1", "c2"] and end.needs == [False, True]
    assert side.ran == [] and "RunTool" not in side.kinds()
    assert messages[-1]["role"] == "assistant"  # the turn that asked is kept for the resume; no tool turn follows


def test_a_run_that_cannot_wait_refuses_the_ruled_call_and_runs_the_others():
    side = ScriptedSide([reply("", call("c1", "calc"), call("c2", "deploy")), reply("ok")])
    end, messages = run(side, ruled=lambda name: name == "deploy", can_wait=False)
    assert isinstance(end, Answered) and side.ran == ["c1"]
    refused = [op for op in side.ops if isinstance(op, RefuseTool)]
    assert len(refused) == 1 and refused[0].call.id == "c2" and refused[0].result == NESTED_NOT_APPROVED
    assert messages[3] == {"role": "tool", "tool_call_id": "c2", "content": NESTED_NOT_APPROVED}


def test_a_stop_between_calls_ends_the_loop_before_the_next_call():
    side = ScriptedSide([reply("", call("c1", "calc"), call("c2", "calc"))], stop_after_calls=1)
    with pytest.raises(Stopped):
        run(side)
    assert side.ran == ["c1"]
    assert side.kinds()[-2:] == ["RunTool", "CheckStop"]
    assert side.replies == []  # no further model call


def test_a_steering_message_after_the_answer_continues_the_run_when_asked_to():
    side = ScriptedSide([reply("first"), reply("second")], steering=[[], ["and more?"]])
    end, messages = run(side, steer_after_answer=True)
    assert isinstance(end, Answered) and end.text == "second"
    assert side.ops[3] == Steer([{"role": "assistant", "content": "first"}, {"role": "user", "content": "and more?"}], after_answer=True)
    assert messages[1:] == [{"role": "assistant", "content": "first"}, {"role": "user", "content": "and more?"}]
    no_followup = ScriptedSide([reply("first")], steering=[[], ["and more?"]])
    assert run(no_followup)[0].text == "first" and no_followup.kinds() == ["Steer", "AskModel", "Said"]


def test_a_turn_calling_a_client_tool_is_handed_back_after_the_local_calls_ran():
    side = ScriptedSide([reply("", call("c1", "calc"), call("c2", "browser"))])
    end, _ = run(side, client={"browser"})
    assert isinstance(end, HandsBack) and [c.id for c in end.calls] == ["c2"] and side.ran == ["c1"]


def test_a_resumed_loop_starts_at_its_round_and_none_left_ends_with_none():
    side = ScriptedSide([reply("done")])
    end, _ = run(side, first_round=3)
    assert side.asked[0].round_no == 3 and side.asked[0].offer is None and isinstance(end, Answered)
    assert run(ScriptedSide([]), first_round=4)[0] is None


def test_the_async_driver_runs_the_same_loop():
    side = ScriptedSide([reply("", call("c1", "calc")), reply("4")])

    async def perform(op):
        return side.perform(op)

    end = asyncio.run(awaited_through(tool_loop(messages=[{"role": "user", "content": "hi"}], definitions=TOOLS, rounds=3, local={"calc"}), perform))
    assert isinstance(end, Answered) and end.text == "4" and side.ran == ["c1"]


@pytest.mark.parametrize("path, cls", [("agents/execution/loop.py", "RunLoop"), ("runner/execute.py", "Execution")])
def test_both_sides_drive_the_one_loop_and_keep_no_rounds_of_their_own(path, cls):
    """The server's RunLoop and the machine's Execution call `tool_loop`; neither counts rounds itself."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / path).read_text())
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == cls)
    called = {node.func.id for node in ast.walk(body) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "tool_loop" in called and "offered_tools" not in called
    loops = [node for node in ast.walk(body) if isinstance(node, ast.For) and "round" in ast.unparse(node.target)]
    assert loops == []


@pytest.mark.parametrize("path, cls", [("coding/engine.py", "CodingLoop"), ("runner/coding.py", "CodingExecution")])
def test_both_coding_sides_drive_the_one_coding_loop_and_keep_no_turns_of_their_own(path, cls):
    """The server's CodingLoop and the machine's CodingExecution call `coding_turns`; neither loops
    over turns or over a turn's tool calls itself, nor decides what `finish` means."""
    tree = ast.parse((Path(__file__).resolve().parents[2] / path).read_text())
    body = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == cls)
    called = {node.func.id for node in ast.walk(body) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "coding_turns" in called
    loops = [ast.unparse(node.target) for node in ast.walk(body) if isinstance(node, (ast.For, ast.AsyncFor, ast.While))
             and any(word in ast.unparse(node.target if isinstance(node, (ast.For, ast.AsyncFor)) else node.test) for word in ("turn", "round", "call"))]
    assert loops == []
    names = {node.id for node in ast.walk(body) if isinstance(node, ast.Name)}
    assert not names & {"FINISH", "WRITING_TOOLS", "assistant_turn", "tool_turn", "parsed_arguments"}
    attributes = {node.attr for node in ast.walk(body) if isinstance(node, ast.Attribute)}
    assert not attributes & {"tree_warning", "commit_subject", "FINISH_HELD"}  # what is committed and told is the shared loop's
