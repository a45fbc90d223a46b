"""The console's scripts read the vocabulary from one module generated from agents_site/vocabulary.py (issue 27 item 5).

`static/console/vocabulary.js` is written by `manage.py write_vocabulary_js`; a word added to or
changed in the vocabulary without regenerating it fails here, and so does a script spelling a
stream frame's name or a chat role itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from agents_site.vocabulary import VOCABULARY_JS_PATH, ChatRole, InboxStreamFrame, ReplyFrame, StreamFrameKind, vocabulary_js

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted(p for p in (ROOT / "static" / "console").glob("*.js") if p.name != "vocabulary.js")


def test_the_committed_vocabulary_module_is_what_the_vocabulary_generates():
    committed = (ROOT / VOCABULARY_JS_PATH).read_text(encoding="utf-8")
    assert committed == vocabulary_js(), "static/console/vocabulary.js is stale: run `python manage.py write_vocabulary_js`"


def test_the_command_checks_and_writes_the_module(tmp_path, settings):
    call_command("write_vocabulary_js", "--check")  # the committed file is current
    settings.BASE_DIR = tmp_path
    (tmp_path / "static" / "console").mkdir(parents=True)
    (tmp_path / VOCABULARY_JS_PATH).write_text("/* stale */", encoding="utf-8")
    with pytest.raises(CommandError, match="stale"):
        call_command("write_vocabulary_js", "--check")
    call_command("write_vocabulary_js")
    assert (tmp_path / VOCABULARY_JS_PATH).read_text(encoding="utf-8") == vocabulary_js()


def test_the_module_names_every_member_of_every_enum():
    text = vocabulary_js()
    for enum, member in ((ReplyFrame, "DELTA"), (StreamFrameKind, "RESET"), (ChatRole, "TOOL")):
        assert re.search(rf'"{enum.__name__}": \{{[^}}]*"{member}": "{getattr(enum, member).value}"', text), (enum, member)


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_no_script_spells_a_frame_name_or_a_role(path):
    text = path.read_text(encoding="utf-8")
    frames = "|".join(re.escape(w) for w in {*ReplyFrame.values, *StreamFrameKind.values, *InboxStreamFrame.values})
    roles = "|".join(re.escape(w) for w in ChatRole.values)
    spelled = re.findall(rf'event\s*===?\s*["\']({frames})["\']|addEventListener\(\s*["\']({frames})["\']|role\s*===?\s*["\']({roles})["\']', text)
    assert spelled == []
