"""What a run changed in the shell's git work tree, for the report (read-only)."""

from __future__ import annotations

import subprocess

from runner.gitinfo import describe


def git(root, *args):
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.com", *args], check=True, capture_output=True)


async def test_a_work_tree_reports_branch_head_and_changes(tmp_path):
    git(tmp_path, "init", "-q", "-b", "feature")
    (tmp_path / "a.txt").write_text("a\n")
    git(tmp_path, "add", "a.txt")
    git(tmp_path, "commit", "-q", "-m", "start")
    assert (await describe(tmp_path))["changed"] is False
    (tmp_path / "a.txt").write_text("b\n")
    (tmp_path / "new.txt").write_text("n\n")
    report = await describe(tmp_path)
    assert report["branch"] == "feature" and len(report["commitSha"]) == 40 and report["changed"] is True
    assert "a.txt" in report["diffstat"] and "new.txt (new, untracked)" in report["diffstat"]


async def test_no_root_or_no_work_tree_reports_nothing(tmp_path):
    assert await describe(None) == {}
    assert await describe(tmp_path) == {}


async def test_a_fresh_repository_without_commits_has_no_head(tmp_path):
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "x").write_text("x")
    report = await describe(tmp_path)
    assert report["commitSha"] == "" and report["changed"] is True and "x (new, untracked)" in report["diffstat"]
