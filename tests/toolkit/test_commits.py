"""The commit planner shared by the server's coding engine and the runner (issue 30 items 5, 6)."""

from __future__ import annotations

import os

from toolkit.commits import MIB, Bounds, TurnPlan, changes_subject, commit_subject, is_by_product, link_outside, plan_turn


def test_common_by_products_are_recognised_and_sources_are_not():
    for path in ("a/__pycache__/m.cpython-311.pyc", "x.pyc", "node_modules/p/index.js", ".venv/bin/python",
                 ".pytest_cache/v/cache", "pkg.egg-info/PKG-INFO", ".coverage"):
        assert is_by_product(path), path
    for path in ("src/app.py", "pycache.py", "docs/node_modules.md", "venv.txt"):
        assert not is_by_product(path), path


def test_links_resolving_outside_are_named_and_inside_links_pass(tmp_path):
    root = tmp_path / "w"
    (root / "docs").mkdir(parents=True)
    (root / "README.md").write_text("r")
    os.symlink("/etc/passwd", root / "pw")
    os.symlink("../..", root / "docs" / "up")
    os.symlink("../README.md", root / "docs" / "readme")
    os.symlink("docs/up", root / "chain")  # inside, but what it points at leaves
    assert link_outside(root, "pw") == "/etc/passwd"
    assert link_outside(root, "docs/up") == "../.."
    assert link_outside(root, "chain") == "docs/up"
    assert link_outside(root, "docs/readme") == ""
    assert link_outside(root, "README.md") == ""


def test_plan_leaves_out_untracked_by_products_but_keeps_tracked_ones(tmp_path):
    (tmp_path / "a.py").write_text("a")
    status = "?? a.py\x00?? b/__pycache__/a.pyc\x00 M c/__pycache__/t.pyc\x00 D gone.txt\x00"
    plan = plan_turn(status, tmp_path, bounds=Bounds())
    assert plan.stage == ["a.py", "c/__pycache__/t.pyc", "gone.txt"] and plan.by_products == ["b/__pycache__/a.pyc"]
    assert plan.added == ["a.py"] and plan.deleted == ["gone.txt"] and plan.committable


def test_plan_refuses_a_turn_over_a_bound_naming_the_files(tmp_path):
    (tmp_path / "big.bin").write_bytes(b"x" * (MIB + 1))
    (tmp_path / "s.txt").write_text("s")
    plan = plan_turn("?? big.bin\x00?? s.txt\x00", tmp_path, bounds=Bounds(max_file_bytes=MIB))
    assert not plan.committable and "big.bin (1.0 MiB)" in plan.refusal and "per-file limit" in plan.refusal
    plan = plan_turn("?? s.txt\x00", tmp_path, bounds=Bounds(max_push_bytes=MIB), pushed_bytes=MIB)
    assert not plan.committable and "push limit" in plan.refusal and "s.txt" in plan.refusal


def test_subject_prefers_the_models_words_then_the_changes():
    plan = TurnPlan(added=["t.py"], modified=["a.py", "b.py", "c.py", "d.py"])
    assert commit_subject(content="# Fix add\nmore", finished="done", plan=plan) == "Fix add"
    assert commit_subject(content="", finished="All fixed\n\nlong", plan=plan) == "All fixed"
    assert commit_subject(content="", finished=None, plan=plan) == "Add t.py; update a.py, b.py, c.py and 1 more"
    # A reply opening with a code block: its lines are a command, never the subject.
    assert commit_subject(content="```sh\npython3 -m pytest -q\n```\nTests pass now", finished=None, plan=plan) == "Tests pass now"
    assert commit_subject(content="```\nrm -rf build\n```", finished="Cleaned", plan=plan) == "Cleaned"
    assert commit_subject(content="~~~\nmake\n~~~", finished=None, plan=plan).startswith("Add t.py")
    assert changes_subject(TurnPlan()) == "Update files"
    assert len(changes_subject(TurnPlan(added=["x" * 100]))) == 72


def test_bounds_travel_in_a_claim_and_bad_values_fall_back():
    bounds = Bounds.from_mb(file_mb=3, push_mb=7, tree_mb=9)
    assert Bounds.from_wire(bounds.as_wire()) == bounds
    assert Bounds.from_wire({"maxFileMb": "x", "maxPushMb": -1}) == Bounds()
