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
