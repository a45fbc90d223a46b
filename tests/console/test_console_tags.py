"""The console's template filters (issue 34: no one-line JSON where a person reads)."""

from console.templatetags.console_tags import indented_json


def test_tool_arguments_are_indented_and_keep_their_characters():
    assert indented_json('{"path": "cart.py", "note": "請求書"}') == '{\n  "path": "cart.py",\n  "note": "請求書"\n}'


def test_text_that_is_not_whole_json_is_shown_as_it_is():
    cut = '{"content": "def total(xs):\\n' + "x" * 10 + " …"
    assert indented_json(cut) == cut
    assert indented_json("42") == "42" and indented_json("plain words") == "plain words"
    assert indented_json(None) == ""
