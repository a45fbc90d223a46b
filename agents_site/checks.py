"""System checks of the platform's own requirements, run by every `manage.py` command and at start.

`agents.E001`: the SQLite library Python links is older than `SQLITE_MINIMUM` (3.35.0). The run
lifecycle finishes a run with one `UPDATE … RETURNING` (runs/lifecycle.py) and the event
clock takes positions the same way; SQLite added `RETURNING` in 3.35.0 (2021-03). The check runs
in both store modes: the default database is SQLite unless DATABASE_URL says otherwise, and a
deployment may switch its org stores later.

`agents.W001`: `INFERENCE_TIMEOUT_SECONDS` (the one gateway timeout before issue 31 split it) is
set. It is still honoured — the default of `INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS` and
`INFERENCE_TOKEN_TIMEOUT_SECONDS`, and the longest one completion may take — and the warning
says so and names the settings that replace it.

`agents.W002`: `AGENTS_PAUSE_TIMEOUT_SECONDS` is longer than `AGENTS_RUN_DEADLINE_SECONDS`: a
paused run ends at its deadline first (the deadline counts paused time), so the longer value
never applies.
"""

from __future__ import annotations

import sqlite3

from django.conf import settings
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


def timeout_problems(*, legacy_timeout: float | None, first_token: float, between_tokens: float, pause: float,
                     deadline: float) -> list[checks.CheckMessage]:
    """Return the check messages of the timeout settings (seconds; `legacy_timeout` None when unset)."""
    problems: list[checks.CheckMessage] = []
    if legacy_timeout:
        problems.append(checks.Warning(
            f"INFERENCE_TIMEOUT_SECONDS ({legacy_timeout:g}) is deprecated; it is honoured as each completion's limit and as "
            f"the default of the first-token ({first_token:g} s) and between-tokens ({between_tokens:g} s) timeouts",
            hint="set INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS and INFERENCE_TOKEN_TIMEOUT_SECONDS (and AGENTS_RUN_DEADLINE_SECONDS "
                 "for a run as a whole), then unset INFERENCE_TIMEOUT_SECONDS",
            id="agents.W001",
        ))
    if pause > deadline:
        problems.append(checks.Warning(
            f"AGENTS_PAUSE_TIMEOUT_SECONDS ({pause:g}) is longer than AGENTS_RUN_DEADLINE_SECONDS ({deadline:g}): "
            "a paused run ends at its deadline first",
            hint="lower AGENTS_PAUSE_TIMEOUT_SECONDS, or raise AGENTS_RUN_DEADLINE_SECONDS (below AGENTS_RUN_TIMEOUT_SECONDS)",
            id="agents.W002",
        ))
    return problems


@checks.register(checks.Tags.compatibility)
def check_timeouts(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Django system checks `agents.W001` (the deprecated gateway timeout) and `agents.W002` (a pause past the deadline)."""
    return timeout_problems(
        legacy_timeout=getattr(settings, "INFERENCE_TIMEOUT_SECONDS", None),
        first_token=settings.INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS,
        between_tokens=settings.INFERENCE_TOKEN_TIMEOUT_SECONDS,
        pause=settings.AGENTS_PAUSE_TIMEOUT_SECONDS,
        deadline=settings.AGENTS_RUN_DEADLINE_SECONDS,
    )
