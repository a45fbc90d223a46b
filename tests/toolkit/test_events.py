"""The session events both sides write (`toolkit.events`): previews, valid text, the tool-call event."""

from __future__ import annotations

import json

from toolkit.events import (CODING_PREVIEW_BYTES, EVENT_BUDGET_BYTES, EVENT_PREVIEW_BYTES, TEXT_PREVIEW_BYTES, arguments_for_event, clip,
                            coding_call_payload, commit_payload, stopped_command, tool_call_payload, valid_text)


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


def test_a_coding_call_keeps_previews_and_its_arguments_while_they_are_short():
    short = coding_call_payload(name="run", raw_arguments='{"command": "ls"}', result="r" * 5000, failed=False, turn_no=3, run_id="run_1")
    assert short == {"name": "run", "arguments": {"command": "ls"}, "result": "r" * CODING_PREVIEW_BYTES + "…", "error": False,
                     "round": 3, "runId": "run_1"}
    long = json.dumps({"content": "x" * 5000})
    assert coding_call_payload(name="write_file", raw_arguments=long, result="ok", failed=False, turn_no=1, run_id="r")["arguments"] == clip(
        long, CODING_PREVIEW_BYTES)
    assert coding_call_payload(name="t", raw_arguments="[1]", result="", failed=True, turn_no=1, run_id="r")["arguments"] == {}


def test_a_commit_and_a_stopped_command_keep_previews():
    payload = commit_payload(subject="s", sha="abc", diffstat="d" * 5000, turn=7, branch="b", patch="p" * 20000, run_id="r")
    assert payload["text"] == payload["subject"] == "s" and payload["commit"] == "abc" and (payload["turn"], payload["branch"]) == (7, "b")
    assert len(payload["diffstat"].encode()) == CODING_PREVIEW_BYTES + 3 and len(payload["patch"].encode()) == 16 * 1024 + 3
    assert stopped_command(name="run", command="sleep 9", output="o" * 5000) == {"name": "run", "command": "sleep 9",
                                                                                 "output": "o" * CODING_PREVIEW_BYTES + "…"}
