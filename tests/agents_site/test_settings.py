"""The environment's timeout variables as `agents_site/settings.py` reads them (issue 31).

Each test reads the settings module afresh (`runpy`) under an environment it sets, so the
defaults and the deprecated alias are what a deployment starting with that environment gets.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

SETTINGS = Path(__file__).resolve().parents[2] / "agents_site" / "settings.py"
NAMES = ("INFERENCE_TIMEOUT_SECONDS", "INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS", "INFERENCE_TOKEN_TIMEOUT_SECONDS",
         "AGENTS_RUN_TIMEOUT_SECONDS", "AGENTS_RUN_DEADLINE_SECONDS", "AGENTS_PAUSE_TIMEOUT_SECONDS")


@pytest.fixture
def read(monkeypatch):
    """`read(**env)`: the settings module's globals under `env` (the timeout variables otherwise unset)."""
    def _read(**env: str) -> dict:
        for name in NAMES:
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return runpy.run_path(str(SETTINGS))
    return _read


def test_without_the_old_variable_the_split_timeouts_keep_their_defaults(read):
    s = read()
    assert s["INFERENCE_TIMEOUT_SECONDS"] is None
    assert (s["INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS"], s["INFERENCE_TOKEN_TIMEOUT_SECONDS"]) == (300.0, 60.0)


def test_the_old_variable_is_the_default_of_both_read_timeouts(read):
    s = read(INFERENCE_TIMEOUT_SECONDS="900")
    assert s["INFERENCE_TIMEOUT_SECONDS"] == 900.0
    assert (s["INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS"], s["INFERENCE_TOKEN_TIMEOUT_SECONDS"]) == (900.0, 900.0)


def test_a_split_timeout_that_is_set_wins_over_the_old_variable(read):
    s = read(INFERENCE_TIMEOUT_SECONDS="900", INFERENCE_TOKEN_TIMEOUT_SECONDS="45")
    assert (s["INFERENCE_FIRST_TOKEN_TIMEOUT_SECONDS"], s["INFERENCE_TOKEN_TIMEOUT_SECONDS"]) == (900.0, 45.0)


def test_the_old_variable_at_zero_is_unset(read):
    assert read(INFERENCE_TIMEOUT_SECONDS="0")["INFERENCE_TIMEOUT_SECONDS"] is None


def test_the_pause_timeout_defaults_to_the_run_deadline_which_is_below_the_task_kill(read):
    s = read()
    assert (s["AGENTS_RUN_TIMEOUT_SECONDS"], s["AGENTS_RUN_DEADLINE_SECONDS"], s["AGENTS_PAUSE_TIMEOUT_SECONDS"]) == (600, 540.0, 540.0)
    s = read(AGENTS_RUN_TIMEOUT_SECONDS="300")
    assert (s["AGENTS_RUN_DEADLINE_SECONDS"], s["AGENTS_PAUSE_TIMEOUT_SECONDS"]) == (240.0, 240.0)
    assert read(AGENTS_PAUSE_TIMEOUT_SECONDS="120")["AGENTS_PAUSE_TIMEOUT_SECONDS"] == 120.0
