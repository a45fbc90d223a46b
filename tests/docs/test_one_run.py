"""docs/architecture/one-run.md: the walk of one run is a traced run, so it cannot drift from the code."""

from __future__ import annotations

import subprocess
import sys

from scripts.docs import one_run
from tests.support.live import ROOT


def test_the_committed_walk_is_what_a_traced_run_visits():
    """The generator on a throwaway site with the demo gateway (`generate.py --check one-run`): the page is what it finds."""
    checked = subprocess.run([sys.executable, "scripts/docs/generate.py", "--check", "one-run"], cwd=ROOT,
                             capture_output=True, text=True, timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr[-3000:]


def test_a_landmark_the_trace_did_not_visit_is_refused():
    by_module: dict[str, list[str]] = {}
    for module, function, _ in one_run.LANDMARKS:
        by_module.setdefault(module, []).append(function)
    visits = list(by_module.items())
    assert "`runs/lifecycle.py` `run_start`" in one_run.render(visits, {"status": "ok"})
    gone = [(m, fs) for m, fs in visits if m != "billing/services.py"]
    try:
        one_run.render(gone, {"status": "ok"})
    except RuntimeError as exc:
        assert "billing/services.py run_debit" in str(exc)
    else:
        raise AssertionError("a landmark the run no longer visits was rendered")


def test_the_tracer_lists_project_modules_by_first_visit_and_nothing_else():
    from runs import lifecycle  # noqa: F401  (a project module)
    import json

    def call():
        json.dumps({})
        one_run.summary("runs/lifecycle.py")  # scripts/ is not a project package: not listed
        from agents_site.wire import compact
        compact({"a": None})

    visits = one_run.trace(call)
    assert visits == [("agents_site/wire.py", ["compact"])]
