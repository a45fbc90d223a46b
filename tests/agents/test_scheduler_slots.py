"""Slot arithmetic: croniter in the agent's time zone, DST rules, backoff lengths (pure)."""

from __future__ import annotations

from zoneinfo import ZoneInfo

import pytest

from agents.modes import next_fire_utc
from agents.scheduling.slots import MAX_BACKOFF_SLOTS, backoff_slots, is_fixed_time, next_slot, slots_between
from tests.agents.conftest import utc


def test_every_five_minutes_is_due_at_1235_and_not_at_1236():
    assert slots_between("*/5 * * * *", "UTC", utc(2026, 1, 10, 12, 34), utc(2026, 1, 10, 12, 35)) == [utc(2026, 1, 10, 12, 35)]
    assert slots_between("*/5 * * * *", "UTC", utc(2026, 1, 10, 12, 35), utc(2026, 1, 10, 12, 36, 59)) == []


def test_midnight_in_los_angeles_is_0800z_in_winter_and_0700z_in_summer():
    assert next_fire_utc("0 0 * * *", "America/Los_Angeles", utc(2026, 1, 10, 12, 0)) == utc(2026, 1, 11, 8, 0)
    assert next_fire_utc("0 0 * * *", "America/Los_Angeles", utc(2026, 7, 10, 12, 0)) == utc(2026, 7, 11, 7, 0)


def test_spring_forward_day_fires_a_skipped_fixed_time_once_after_the_gap():
    # 2026-03-08 02:00 PST jumps to 03:00 PDT: 02:30 does not exist that day.
    day = slots_between("30 2 * * *", "America/Los_Angeles", utc(2026, 3, 8, 8, 0), utc(2026, 3, 9, 8, 0))
    assert day == [utc(2026, 3, 8, 10, 0)]  # 03:00 PDT, the first minute after the gap


def test_fall_back_day_fires_a_repeated_fixed_time_once():
    # 2026-11-01 01:00-02:00 happens twice in Los Angeles (PDT then PST).
    day = slots_between("30 1 * * *", "America/Los_Angeles", utc(2026, 11, 1, 7, 0), utc(2026, 11, 2, 8, 0))
    assert day == [utc(2026, 11, 1, 8, 30)]  # 01:30 PDT; not again at 01:30 PST (09:30Z)


@pytest.mark.parametrize("schedule", ["0 0 * * *", "15 3 * * *", "0 12 * * *"])
def test_each_day_across_both_dst_changes_fires_exactly_once(schedule):
    days = slots_between(schedule, "America/New_York", utc(2026, 3, 6, 0, 0), utc(2026, 3, 11, 0, 0))
    days += slots_between(schedule, "America/New_York", utc(2026, 10, 30, 0, 0), utc(2026, 11, 4, 0, 0))
    local_dates = [s.astimezone(ZoneInfo("America/New_York")).date() for s in days]
    assert len(local_dates) == len(set(local_dates)) == 10


def test_a_wildcard_hour_schedule_runs_on_both_passes_of_the_repeated_hour():
    slots = slots_between("*/30 * * * *", "America/Los_Angeles", utc(2026, 11, 1, 8, 0), utc(2026, 11, 1, 10, 0))
    # 01:30 PDT, 01:00 PST, 01:30 PST, 02:00 PST: an hour repeats, so does its work.
    assert slots == [utc(2026, 11, 1, 8, 30), utc(2026, 11, 1, 9, 0), utc(2026, 11, 1, 9, 30), utc(2026, 11, 1, 10, 0)]


def test_fixed_time_means_no_star_in_minute_or_hour():
    assert is_fixed_time("30 1 * * *") and is_fixed_time("0 1-3 * * 1")
    assert not is_fixed_time("*/5 1 * * *") and not is_fixed_time("0 * * * *")


def test_backoff_skips_two_to_the_streak_minus_one_slots_capped_at_sixty():
    assert [backoff_slots(n) for n in range(0, 9)] == [0, 1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff_slots(500) == MAX_BACKOFF_SLOTS == 60


def test_keep_last_bounds_the_slots_returned_to_the_newest():
    slots = slots_between("* * * * *", "UTC", utc(2026, 1, 10, 0, 0), utc(2026, 1, 10, 10, 0), keep_last=3)
    assert slots == [utc(2026, 1, 10, 9, 58), utc(2026, 1, 10, 9, 59), utc(2026, 1, 10, 10, 0)]


def test_next_slot_is_strictly_after_the_given_instant():
    assert next_slot("*/5 * * * *", "UTC", utc(2026, 1, 10, 12, 35)) == utc(2026, 1, 10, 12, 40)
    assert next_slot("", "UTC", utc(2026, 1, 10, 12, 35)) is None
