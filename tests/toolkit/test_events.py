"""The session events both sides write (`toolkit.events`): previews, valid text, the tool-call event."""

from __future__ import annotations

import json

from toolkit.events import EVENT_BUDGET_BYTES, EVENT_PREVIEW_BYTES, TEXT_PREVIEW_BYTES, arguments_for_event, clip, tool_call_payload, valid_text


def _size(payload: dict) -> int:
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())


def test_clip_cuts_at_a_byte_limit_on_a_whole_character():
    assert clip("héllo", 2) == "h…"
    assert clip("hello", 5) == "hello"
    assert clip("x" * (TEXT_PREVIEW_BYTES + 1)) == "x" * TEXT_PREVIEW_BYTES + "…"


def test_valid_text_replaces_a_lone_surrogate():
    assert valid_text("a\ud800b") == "a?b"
    assert valid_text(None) == ""


def test_arguments_are_decoded_when_they_parse_and_fit():
    assert arguments_for_event('{"q": 1}', None) == {"q": 1}
    assert arguments_for_event("not json", None) == "not json"
    assert arguments_for_event('{"q": "abcdefgh"}', 8) == '{"q": "a…'
    assert arguments_for_event("not json at all", 3) == "not…"


def test_a_tool_call_event_holds_the_call_whole_with_its_ids():
    payload = tool_call_payload(name="shell", raw_arguments='{"command": "ls"}', result="a\nb", failed=False, round_no=2,
                                call_id="call_1", run_id="run_1")
    assert payload == {"name": "shell", "arguments": {"command": "ls"}, "result": "a\nb", "error": False, "round": 2,
                       "toolCallId": "call_1", "runId": "run_1"}


def test_a_tool_call_event_past_the_budget_is_cut_to_the_previews():
    big = "\x01" * (15 * 1024)  # six bytes of JSON each once escaped
    payload = tool_call_payload(name="t", raw_arguments=json.dumps({"q": big}), result=big, failed=True, round_no=1, call_id="c", run_id="r")
    assert _size(payload) <= EVENT_BUDGET_BYTES
    assert isinstance(payload["arguments"], str) and len(payload["arguments"].encode()) <= EVENT_PREVIEW_BYTES + 3
    assert len(payload["result"].encode()) <= EVENT_PREVIEW_BYTES + 3
