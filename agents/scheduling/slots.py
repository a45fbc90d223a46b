"""Slot arithmetic of a 5-field cron in an IANA time zone (pure: no database, no clock).

A slot is the UTC instant of one scheduled minute. Slots are computed by croniter in the
agent's zone, then two daylight-saving rules apply (those of Vixie cron):

- Spring forward: a fixed-time slot inside the skipped hour fires once, at the first minute
  after the gap (`30 2 * * *` in America/New_York on 2026-03-08 fires at 03:00 EDT = 07:00Z).
- Fall back: a fixed-time slot inside the repeated hour fires once, on its first occurrence
  (`30 1 * * *` in America/New_York on 2026-11-01 fires at 01:30 EDT = 05:30Z, not again at
  01:30 EST). A schedule with `*` in its minute or hour field is not fixed-time and fires on
  both passes of the repeated hour, like any other hour.
"""

from __future__ import annotations

from collections import deque
from datetime import datetime, timedelta, timezone as dt_timezone
from zoneinfo import ZoneInfo

from croniter import croniter

UTC = dt_timezone.utc

#: Backoff never skips more than this many slots (reference §6.2).
MAX_BACKOFF_SLOTS = 60

#: Safety bound on slots walked by one `slots_between` (a minutely cron over ~7 days).
MAX_WALK = 10_000


def is_fixed_time(schedule: str) -> bool:
    """Return True when neither the minute nor the hour field contains `*`.

    Example: `"30 1 * * *"` → True; `"*/5 1 * * *"` and `"0 * * * *"` → False.
    """
    fields = schedule.split()
    return len(fields) >= 2 and "*" not in fields[0] and "*" not in fields[1]


def _is_repeat(slot_utc: datetime, zone: ZoneInfo) -> bool:
    """Return True when `slot_utc` is the second occurrence of an ambiguous local time."""
    local = slot_utc.astimezone(zone)
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


def iter_slots(schedule: str, tz_name: str, after: datetime):
    """Yield the UTC slots of `schedule` in zone `tz_name` strictly after `after`, in order.

    Infinite for any valid cron; callers bound it. Raises croniter's errors for a cron that
    never fires (`0 0 30 2 *`).
    """
    zone = ZoneInfo(tz_name or "UTC")
    fixed = is_fixed_time(schedule)
    after = after.astimezone(UTC)
    it = croniter(schedule, after.astimezone(zone))
    previous = after
    stalls = 0
    while stalls < 100:  # croniter never stalls on a valid cron; this only bounds a bug
        slot = it.get_next(datetime).astimezone(UTC)
        if slot <= previous:
            stalls += 1
            continue
        stalls = 0
        previous = slot
        if fixed and _is_repeat(slot, zone):
            continue
        yield slot


def slots_between(schedule: str, tz_name: str, after: datetime, until: datetime, *, keep_last: int | None = None) -> list[datetime]:
    """Return the UTC slots `s` with `after < s <= until`, oldest first.

    With `keep_last`, only the newest `keep_last` are returned (a scheduler that was down for
    a month records a bounded number of missed slots, not tens of thousands). At most
    `MAX_WALK` slots are walked: callers pass an `after` no older than a few days.

    Example: `slots_between("*/5 * * * *", "UTC", 12:31Z, 12:44Z)` → `[12:35Z, 12:40Z]`.
    """
    out: deque[datetime] = deque(maxlen=keep_last)
    for steps, slot in enumerate(iter_slots(schedule, tz_name, after)):
        if slot > until or steps >= MAX_WALK:
            break
        out.append(slot)
    return list(out)


def next_slot(schedule: str, tz_name: str, after: datetime) -> datetime | None:
    """Return the first UTC slot strictly after `after`, or None for an empty schedule.

    Example: `next_slot("0 0 * * *", "America/Los_Angeles", 2026-01-10T12:00Z)` →
    `2026-01-11T08:00Z` (PST); in July the same cron gives `07:00Z` (PDT).
    """
    if not schedule:
        return None
    return next(iter_slots(schedule, tz_name, after), None)


def backoff_slots(fail_streak: int) -> int:
    """Return how many fireable slots to skip after `fail_streak` consecutive failed runs.

    `2^(n-1)` capped at 60: 1 → 1, 2 → 2, 3 → 4, … 7 → 60; 0 → 0.
    """
    if fail_streak <= 0:
        return 0
    return min(2 ** min(fail_streak - 1, 16), MAX_BACKOFF_SLOTS)


def minute_floor(value: datetime) -> datetime:
    """Return `value` in UTC truncated to the minute."""
    value = value.astimezone(UTC)
    return value - timedelta(seconds=value.second, microseconds=value.microsecond)
