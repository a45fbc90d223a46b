"""The tool loop's rules both sides follow (`toolkit.toolloop`)."""

from __future__ import annotations

from toolkit.toolloop import assistant_turn, command_text, offered_tools, opening_messages, parsed_arguments, tool_turn


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
