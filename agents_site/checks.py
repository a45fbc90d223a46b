"""System checks of the platform's own requirements, run by every `manage.py` command and at start.

`agents.E001`: the SQLite library Python links is older than `SQLITE_MINIMUM` (3.35.0). The run
lifecycle finishes a run with one `UPDATE … RETURNING` (agents/runs/lifecycle.py) and the event
clock takes positions the same way; SQLite added `RETURNING` in 3.35.0 (2021-03). The check runs
in both store modes: the default database is SQLite unless DATABASE_URL says otherwise, and a
deployment may switch its org stores later.
"""

from __future__ import annotations

import sqlite3

from django.core import checks

SQLITE_MINIMUM = (3, 35, 0)


def sqlite_version_problems(version: tuple[int, ...]) -> list[checks.CheckMessage]:
    """Return the check messages for SQLite library `version` (empty when it is new enough)."""
    if tuple(version[:3]) >= SQLITE_MINIMUM:
        return []
    have = ".".join(map(str, version))
    need = ".".join(map(str, SQLITE_MINIMUM))
    return [checks.Error(
        f"SQLite {have} is older than the {need} this platform needs (UPDATE … RETURNING)",
        hint="run on a Python linked against a newer SQLite (python.org builds since 3.10 are), or install pysqlite3-binary",
        id="agents.E001",
    )]


@checks.register(checks.Tags.compatibility)
def check_sqlite_version(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Django system check `agents.E001`: the linked SQLite is at least `SQLITE_MINIMUM`."""
    return sqlite_version_problems(sqlite3.sqlite_version_info)
