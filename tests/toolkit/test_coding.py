"""The coding tools refuse paths out of the working copy and never follow a link (issue 14 item 3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from toolkit.sandbox import BubblewrapSandbox, Limits
from toolkit.coding import ToolBox, tool_definitions


@pytest.fixture
def box(tmp_path) -> ToolBox:
    root = tmp_path / "work"
    root.mkdir()
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\nprint('hi')\n")
    return ToolBox(root=root, sandbox=BubblewrapSandbox(), limits=Limits(timeout_seconds=10))


def call(box: ToolBox, name: str, **arguments) -> tuple[str, bool]:
    return box.call(name, json.dumps(arguments))


def test_the_seven_tools_are_offered_by_name():
    assert [d["function"]["name"] for d in tool_definitions()] == ["list_files", "read_file", "write_file", "edit_file", "search", "run", "finish"]


@pytest.mark.parametrize("name, extra", [
    ("read_file", {}), ("write_file", {"content": "x"}), ("edit_file", {"search": "a", "replace": "b"}),
    ("list_files", {}), ("search", {"query": "x"}),
])
@pytest.mark.parametrize("path", ["../outside", "/etc/passwd", "src/../../x", "~/x", ".git/config"])
def test_every_file_tool_refuses_paths_out_of_the_working_copy(box, name, extra, path, tmp_path):
    result, failed = call(box, name, path=path, **extra)
    assert failed and result.startswith("error: ")
    assert not (tmp_path / "x").exists() and not (tmp_path / "outside").exists()


def test_a_link_out_of_the_working_copy_is_never_followed(box, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("server secret\n")
    os.symlink(secret, box.root / "leak.txt")
    os.symlink(tmp_path, box.root / "up")
    for name, arguments in (
        ("read_file", {"path": "leak.txt"}),
        ("write_file", {"path": "leak.txt", "content": "overwritten"}),
        ("edit_file", {"path": "leak.txt", "search": "server", "replace": "x"}),
        ("read_file", {"path": "up/secret.txt"}),
        ("write_file", {"path": "up/new.txt", "content": "x"}),
        ("list_files", {"path": "up"}),
    ):
        result, failed = call(box, name, **arguments)
        assert failed and "link" in result, (name, result)
    assert secret.read_text() == "server secret\n" and not (tmp_path / "new.txt").exists()
    listing, _ = call(box, "list_files")
    assert "leak.txt (symbolic link)" in listing
    found, _ = call(box, "search", query="server secret")
    assert "leak.txt" not in found


def test_edit_file_exact_search_and_replace(box):
    result, failed = call(box, "edit_file", path="src/app.py", search="print('hi')\n", replace="print('bye')\n")
    assert failed and "occurs 2 times" in result
    result, failed = call(box, "edit_file", path="src/app.py", search="print('hi')\n", replace="print('bye')\n", all=True)
    assert not failed
    assert (box.root / "src" / "app.py").read_text() == "print('bye')\nprint('bye')\n"
    result, failed = call(box, "edit_file", path="src/app.py", search="absent", replace="x")
    assert failed and "not found" in result


def test_write_creates_directories_and_search_finds_lines(box):
    assert call(box, "write_file", path="pkg/mod/util.py", content="VALUE = 42\n") == ("wrote pkg/mod/util.py (11 bytes)", False)
    result, failed = call(box, "search", query="VALUE")
    assert not failed and result == "pkg/mod/util.py:1: VALUE = 42"


def test_placeholder_writes_are_refused(box):
    result, failed = call(box, "write_file", path="x.env", content="KEY=[redacted:aws-access-key]")
    assert failed and "placeholder" in result and not (box.root / "x.env").exists()


def test_bad_arguments_and_unknown_tools_are_errors_to_the_model(box):
    assert box.call("read_file", "{not json")[1] is True
    result, failed = box.call("rm_rf", "{}")
    assert failed and "unknown tool" in result


@pytest.mark.skipif(not BubblewrapSandbox().available(), reason="bubblewrap is not installed")
def test_run_uses_the_sandbox_at_the_working_copy(box):
    result, failed = call(box, "run", command="python3 src/app.py && ls /")
    assert not failed and "hi" in result and "[exit code 0]" in result and "workspace" in result
    result, _ = call(box, "run", command="sleep 30", timeoutSeconds=0.5)
    assert "time limit" in result
