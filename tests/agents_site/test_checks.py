"""The platform's system checks (agents_site/checks.py)."""

from __future__ import annotations

import sqlite3

from django.core import checks
from django.core.management import call_command

from agents_site.checks import SQLITE_MINIMUM, sqlite_version_problems


def test_an_old_sqlite_is_an_error_naming_both_versions():
    [problem] = sqlite_version_problems((3, 31, 1))
    assert problem.id == "agents.E001" and problem.level == checks.ERROR
    assert "3.31.1" in problem.msg and "3.35.0" in problem.msg


def test_the_minimum_itself_and_newer_pass():
    assert sqlite_version_problems(SQLITE_MINIMUM) == []
    assert sqlite_version_problems((3, 45, 1)) == []


def test_the_check_is_registered_and_this_machine_passes_it():
    assert sqlite3.sqlite_version_info >= SQLITE_MINIMUM
    assert [m for m in checks.run_checks() if m.id == "agents.E001"] == []
    call_command("check")  # raises SystemCheckError when an error check fails


def test_manage_check_fails_on_an_old_sqlite(monkeypatch):
    import pytest
    from django.core.management.base import SystemCheckError

    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    with pytest.raises(SystemCheckError, match="agents.E001"):
        call_command("check")


def _timeouts(**changes):
    from agents_site.checks import timeout_problems

    values = {"legacy_timeout": None, "first_token": 300.0, "between_tokens": 60.0, "pause": 540.0, "deadline": 540.0}
    return timeout_problems(**{**values, **changes})


def test_the_default_timeouts_raise_nothing():
    assert _timeouts() == []
    assert [m for m in checks.run_checks() if m.id in ("agents.W001", "agents.W002")] == []


def test_the_deprecated_gateway_timeout_is_a_warning_saying_how_it_is_honoured():
    [problem] = _timeouts(legacy_timeout=120.0, first_token=120.0, between_tokens=120.0)
    assert problem.id == "agents.W001" and problem.level == checks.WARNING
    assert "INFERENCE_TIMEOUT_SECONDS (120) is deprecated" in problem.msg and "INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS" in problem.hint


def test_a_pause_timeout_past_the_run_deadline_is_a_warning(settings):
    settings.AGENTS_PAUSE_TIMEOUT_SECONDS = 600.0
    settings.AGENTS_RUN_DEADLINE_SECONDS = 540.0
    [problem] = [m for m in checks.run_checks() if m.id == "agents.W002"]
    assert problem.level == checks.WARNING and "(600) is longer than AGENTS_RUN_DEADLINE_SECONDS (540)" in problem.msg
