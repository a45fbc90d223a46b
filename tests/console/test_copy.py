"""Copy users read (issue 34): written words, not jargon, raw field names or "(s)" plurals."""

from __future__ import annotations

import re
from pathlib import Path

from tests.console.conftest import signed_in

STATIC = Path(__file__).resolve().parents[2] / "static" / "console"
SCRIPTS = sorted(p for p in STATIC.glob("*.js"))


def test_the_agent_keys_page_says_what_happens_without_cryptographic_jargon(org_a):
    html = signed_in(org_a).get("/console/identity/keys/").content.decode()
    main = html.split("<main", 1)[1]
    for jargon in ("PBKDF2", "AES-GCM", "IndexedDB", "encrypted_backup_blob_v2", "PRF", "<th>agent_id</th>"):
        assert jargon not in main, jargon
    assert "<th>Agent id</th>" in main and "cannot open it" in main


def test_no_console_script_writes_a_plural_with_parentheses():
    offenders = [f"{p.name}: {m.group(0)}" for p in SCRIPTS for m in re.finditer(r"(?:agent|relation|user|day|set|run|turn|key|item|session|member)\(s\)", p.read_text())]
    assert offenders == []


def test_a_finished_session_is_described_in_words_not_by_its_status_word():
    text = (STATIC / "session.js").read_text()
    assert '"This session is " + s.status' not in text
    assert "This session ended with an error" in text and "This session has finished" in text


def test_the_system_agents_list_of_agents_has_written_headers():
    text = (STATIC / "artifacts.js").read_text()
    assert '["Name", "Custom id", "Connection", "Keys", ""]' in text  # one id form, the custom id (issue 57)
