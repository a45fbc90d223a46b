"""Execution modes of an agent: its mode, cron schedule and timezone rules (reference §6.1).

A long-running agent must carry a 5-field cron (croniter validates it; macros such as
`@hourly` and 6-field crons with seconds are refused); a one-shot agent drops any schedule.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone as dt_timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from croniter.croniter import CroniterBadDateError, CroniterError

from agents_site.errors import InvalidRequest
from agents_site.vocabulary import ExecutionMode
from agents.scheduling.slots import next_slot


MAX_SCHEDULE_CHARS = 200  # the column's width

# Reference §6.1 grammar: each field a comma list of `*`, `n`, `a-b`, `*/n`, `a-b/n`. No names
# (`MON`), no `L`, `W`, `#`, `?` or `H` extensions; croniter then checks the ranges.
_CRON_FIELD_RE = re.compile(r"^(?:\*(?:/\d+)?|\d+(?:-\d+(?:/\d+)?)?)(?:,(?:\*(?:/\d+)?|\d+(?:-\d+(?:/\d+)?)?))*$")


def validate_cron(expr: str) -> str:
    """Return `expr` trimmed if it is a valid 5-field cron; raise `InvalidRequest` otherwise.

    Example: `"*/5 * * * *"` passes; `"0 0 * * * *"`, `"@daily"`, `"61 * * * *"`,
    `"0 0 * * MON"`, `"0 0 * * 7"` (Sunday is 0) and `"0 0 31 2 *"` (never fires) are 400.
    """
    expr = " ".join(expr.split())
    fields = expr.split(" ") if expr else []
    if expr.startswith("@") or len(fields) != 5:
        raise InvalidRequest("invalid 'schedule': a schedule is a 5-field cron: minute hour day-of-month month day-of-week")
    if len(expr) > MAX_SCHEDULE_CHARS:
        raise InvalidRequest(f"invalid 'schedule': at most {MAX_SCHEDULE_CHARS} characters")
    for field in fields:
        if not _CRON_FIELD_RE.fullmatch(field):
            raise InvalidRequest(f"invalid 'schedule': {field!r} is not a list of *, n, a-b, */n or a-b/n")
    if any(int(n) > 6 for n in re.findall(r"(?<!/)\d+", fields[4])):
        raise InvalidRequest("invalid 'schedule': day-of-week is 0-6 (Sunday is 0)")
    try:
        croniter(expr)
        if not croniter.is_valid(expr):
            raise ValueError("not a valid cron expression")
        croniter(expr, datetime(2000, 1, 1, tzinfo=dt_timezone.utc)).get_next(datetime)
    except CroniterBadDateError as exc:
        raise InvalidRequest("invalid 'schedule': it never fires") from exc
    except (CroniterError, ValueError, KeyError) as exc:
        raise InvalidRequest(f"invalid 'schedule': {exc}") from exc
    return expr


def validate_timezone(name: str | None) -> str:
    """Return an IANA timezone name (default `UTC`); raise `InvalidRequest` for an unknown one."""
    name = (name or "").strip() or "UTC"
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: a directory ("America"), a too-long name
        raise InvalidRequest(f"invalid 'timezone': {name!r} is not an IANA time zone") from exc
    return name


def validate_lifecycle(mode: str | None, schedule: str | None) -> tuple[str, str]:
    """Return `(mode, schedule)` normalised; raise `InvalidRequest` (400) when invalid.

    Empty mode → `one-shot`; one-shot drops the schedule; long-running needs a valid cron.
    """
    mode = (mode or "").strip() or ExecutionMode.ONE_SHOT
    if mode == ExecutionMode.ONE_SHOT:
        return str(ExecutionMode.ONE_SHOT), ""
    if mode != ExecutionMode.LONG_RUNNING:
        raise InvalidRequest("executionMode must be 'one-shot' or 'long-running'")
    schedule = (schedule or "").strip()
    if not schedule:
        raise InvalidRequest("a long-running agent requires a 'schedule' (5-field cron)")
    return str(ExecutionMode.LONG_RUNNING), validate_cron(schedule)


def next_fire_utc(schedule: str, tz_name: str, after: datetime | None = None) -> datetime | None:
    """Return the next fire time of `schedule` in zone `tz_name` after `after`, in UTC.

    Same rules as the scheduler (`agents.scheduling.slots`, DST included). Example:
    `next_fire_utc("0 0 * * *", "America/Los_Angeles", 2026-01-10T12:00Z)` →
    `2026-01-11T08:00Z`. Returns None for an empty schedule.
    """
    if not schedule:
        return None
    return next_slot(schedule, tz_name, after or datetime.now(dt_timezone.utc))
