"""docs/operations/environment.md: every variable the code reads, with defaults the code computes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from scripts.docs import environment
from tests.support.live import ROOT


def test_every_variable_the_code_reads_is_in_the_table_and_the_table_names_none_else():
    read = environment.read_in_code()
    listed = [var.name for var in environment.VARIABLES]
    assert sorted(n for n in listed if listed.count(n) > 1) == [], "a variable is listed twice"
    assert sorted(set(read) - set(listed)) == [], "read by the code but missing from scripts/docs/environment.py's VARIABLES"
    assert sorted(set(listed) - set(read)) == [], "listed, but nothing reads it any more"


def test_a_new_read_of_the_environment_is_found(tmp_path):
    """The scan sees every way the code reads a variable, so the first test can fail."""
    for package in environment.PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "server" / "management" / "commands").mkdir(parents=True)
    (tmp_path / "server" / "management" / "commands" / "serve.py").write_text("")
    (tmp_path / "agents_site" / "settings.py").write_text(
        'A = _env_int("AGENTS_NEW_INT", 3)\nB = os.environ.get("AGENTS_NEW_GET", "")\nC = os.environ["AGENTS_NEW_ITEM"]\n')
    (tmp_path / "runner" / "cli.py").write_text('label = env.get("RUNNER_NEW", "")\n')
    (tmp_path / "Procfile").write_text("web: daphne -p ${AGENTS_NEW_PORT:-1}\n")
    assert set(environment.read_in_code(tmp_path)) == {"AGENTS_NEW_INT", "AGENTS_NEW_GET", "AGENTS_NEW_ITEM", "RUNNER_NEW", "AGENTS_NEW_PORT"}


def test_the_committed_page_is_the_generated_one():
    assert environment.PAGE.read_text(encoding="utf-8") == environment.page(), (
        "docs/operations/environment.md is stale: run python scripts/docs/generate.py environment")


SETTINGS_PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import agents_site.settings as site
from scripts.docs import environment
values = {}
for var in environment.VARIABLES:
    try:
        values[var.name] = environment.setting_value(site, var)
    except (AttributeError, KeyError):
        pass
print(json.dumps(values, default=str))
"""


def test_every_documented_default_is_what_the_settings_compute_with_no_environment(tmp_path):
    """A default written as a value (`600`, `system`, off, unset, empty) is the setting's value in a clean environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "AGENTS_DATA_DIR": str(tmp_path / "data")}
    out = subprocess.run([sys.executable, "-c", SETTINGS_PROBE, str(ROOT)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    values = json.loads(out.stdout)
    checked, wrong = 0, []
    for var in environment.VARIABLES:
        documented = environment.documented_value(var)
        if documented is None or var.name not in values:
            continue
        checked += 1
        if not environment.same(documented, values[var.name]):
            wrong.append(f"{var.name}: documented {var.default}, the setting is {values[var.name]!r}")
    assert wrong == []
    assert checked >= 100, checked  # most defaults are values, so most are checked


def test_the_procfiles_defaults_are_the_documented_ones():
    defaults = environment.procfile_defaults()
    assert {"PORT", "AGENTS_BIND", "AGENTS_LISTEN_BACKLOG"} <= set(defaults)
    by_name = {var.name: var for var in environment.VARIABLES}
    for name, default in defaults.items():
        documented = environment.documented_value(by_name[name])
        if documented is not None:
            assert documented == default, f"{name}: the Procfile's default is {default}, the table says {by_name[name].default}"
