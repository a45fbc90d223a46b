"""The fast path's seam (issue 27 item 3): every hand-written SQL statement on an app's tables is
in the `queries` module of the app that owns them, where it is tested on both stores
(tests/<app>/test_queries.py). Outside them only the infrastructure speaks SQL: the plain-insert
helper (`agents_site/sql.py`), the SQLite engine, the org-store backends (creating databases,
pragmas), the backups and the migrations."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.live import ROOT

APPS = ("server", "agents_site", "tenancy", "billing", "sessions", "runs", "agents", "targets", "coding", "chat", "openai_api",
        "console", "guide", "identity", "webhooks", "toolkit", "runner")
INFRASTRUCTURE = ("agents_site/sql.py", "agents_site/db_backends/", "tenancy/backends/", "tenancy/backups/")
SQL_CALL = re.compile(r"\b(?:cursor\(\)|\w*cursor|conn|connection|db)\.execute(?:many)?\(|\.raw\(|\bRawSQL\(|\.extra\(")


def _sql_calls_outside_the_seam() -> list[str]:
    found = []
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "queries.py" or "/migrations/" in rel or rel.startswith(INFRASTRUCTURE):
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if SQL_CALL.search(line):
                    found.append(f"{rel}:{number}: {line.strip()}")
    return found


def test_hand_written_sql_lives_only_in_queries_modules():
    assert _sql_calls_outside_the_seam() == []


def test_the_seam_check_sees_a_statement():
    assert SQL_CALL.search('        cursor.execute(f"SELECT 1")')
    assert SQL_CALL.search("rows = Run.objects.raw('SELECT * FROM agents_run')")
    assert not SQL_CALL.search("outcome = loop.execute()")


def test_every_app_with_hand_written_sql_tests_its_queries_module():
    for module in sorted(ROOT.glob("*/queries.py")):
        assert (ROOT / "tests" / module.parent.name / "test_queries.py").exists(), module
