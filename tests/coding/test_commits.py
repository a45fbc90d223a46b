"""Clean, bounded commits of a coding run (issue 30 items 5 and 6) with a scripted model, real git
and bubblewrap: by-products and `.gitignore`d files stay out, subjects are the model's words or a
summary of the changes, oversized turns and links out of the working copy are never committed and
the model is told why at that turn."""

from __future__ import annotations

import json

import pytest

from runs.models import Run
from coding.models import CodingRun
from coding.sandbox import get_sandbox
from sessions.models import Event
from tests.coding.conftest import execute, git, start
from tests.support.upstream import Reply

pytestmark = pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed (scripts/test-prereqs.sh)")


def _seed(remote, tmp_path, files: dict[str, str]) -> None:
    """Add `files` to the remote's main in one commit (the repository then tracks them)."""
    work = tmp_path / "seed-extra"
    git("clone", "-q", str(remote), str(work))
    for path, text in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(text)
    git("add", "-f", "-A", cwd=work)
    git("commit", "-q", "-m", "extra", cwd=work)
    git("push", "-q", "origin", "HEAD:main", cwd=work)


def _run(shop, upstream, *replies: Reply) -> tuple[dict, Run, list[dict]]:
    upstream.script(*replies)
    response = start(shop)
    assert response.status_code == 202, response.content
    started = response.json()
    execute(shop, started["runId"])
    with shop.context():
        run = Run.objects.get(pk=started["runId"])
        events = [{"kind": e.kind, "seq": e.seq, **json.loads(e.payload)} for e in Event.objects.filter(session_id=started["sessionId"]).order_by("seq")]
    return started, run, events


def _tree(remote, branch: str) -> list[str]:
    return git("--git-dir", str(remote), "ls-tree", "-r", "--name-only", branch).split()


def _told(upstream) -> list[str]:
    """Return every platform note the model was sent (user turns starting with [platform])."""
    notes = []
    for request in upstream.chat_requests:
        for message in request.get("messages", []):
            if message.get("role") == "user" and str(message.get("content", "")).startswith("[platform]"):
                notes.append(message["content"])
    return list(dict.fromkeys(notes))


def test_by_products_and_ignored_files_are_never_committed(shop, remote, upstream, tmp_path):
    _seed(remote, tmp_path, {".gitignore": "build/\n", "vendor/__pycache__/kept.pyc": "tracked\n"})
    started, run, events = _run(
        shop, upstream,
        Reply(content="Add calc with a test", tool_calls=[
            ("write_file", {"path": "calc.py", "content": "def add(a, b):\n    return a + b\n"}),
            ("run", {"command": "python3 -m py_compile calc.py && python3 -c 'import calc' && mkdir -p node_modules/x .pytest_cache build"
                                " && echo x > node_modules/x/i.js && echo c > .pytest_cache/v && echo b > build/out.txt"
                                " && echo changed > vendor/__pycache__/kept.pyc"}),
        ]),
        Reply(tool_calls=[("finish", {"summary": "calc added"})]),
    )
    assert run.status == "ok", run.error
    tree = _tree(remote, started["branch"])
    assert "calc.py" in tree and "vendor/__pycache__/kept.pyc" in tree  # a tracked by-product stays tracked (and changed)
    assert not [p for p in tree if p.startswith(("node_modules/", ".pytest_cache/", "build/")) or p.endswith(".pyc") and "vendor" not in p]
    assert git("--git-dir", str(remote), "show", f"{started['branch']}:vendor/__pycache__/kept.pyc") == "changed\n"
    commits = [e for e in events if e["kind"] == "commit"]
    assert [c["subject"] for c in commits] == ["Add calc with a test"]


def test_sandbox_writes_no_bytecode(shop, remote, upstream):
    started, run, events = _run(
        shop, upstream,
        Reply(tool_calls=[("write_file", {"path": "m.py", "content": "X = 1\n"}),
                          ("run", {"command": "python3 -c 'import m' && ls -a"})]),
        Reply(tool_calls=[("finish", {"summary": "m"})]),
    )
    result = [e for e in events if e["kind"] == "tool-call"][1]["result"]
    assert "__pycache__" not in result


def test_subject_is_a_summary_of_changes_never_a_command_line(shop, remote, upstream):
    started, run, events = _run(
        shop, upstream,
        Reply(tool_calls=[("run", {"command": "echo hi > notes.txt && rm README.md"})]),
        Reply(tool_calls=[("write_file", {"path": "b.txt", "content": "b\n"}), ("finish", {"summary": "Wrote b\n\nmore words"})]),
    )
    assert run.status == "ok", run.error
    subjects = [e["subject"] for e in events if e["kind"] == "commit"]
    assert subjects == ["Add notes.txt; delete README.md", "Wrote b"]
    log = git("--git-dir", str(remote), "log", "--format=%s", started["branch"]).split("\n")
    assert log[:2] == ["Wrote b", "Add notes.txt; delete README.md"]
    assert "echo" not in "".join(log)
    assert run.output.startswith("Wrote b")  # the finish summary heads the output


def test_a_file_over_the_limit_is_not_committed_and_the_model_is_told(shop, remote, upstream, settings):
    settings.AGENTS_CODING_MAX_FILE_MB = 1
    started, run, events = _run(
        shop, upstream,
        Reply(content="Add data", tool_calls=[("run", {"command": "head -c 1500000 /dev/urandom > big.bin && echo s > small.txt"})]),
        Reply(content="Drop the big file", tool_calls=[("run", {"command": "rm big.bin"})]),
        Reply(tool_calls=[("finish", {"summary": "small only"})]),
    )
    assert run.status == "ok", run.error
    assert _tree(remote, started["branch"]) == ["README.md", "small.txt"]
    commits = [e for e in events if e["kind"] == "commit"]
    assert [c["subject"] for c in commits] == ["Drop the big file"]  # the refused turn made no commit
    told = _told(upstream)
    assert len(told) == 1 and "big.bin (1.4 MiB)" in told[0] and "1.0 MiB per-file limit" in told[0]
    assert any(e["kind"] == "log" and e.get("refused") == "bounds" and e.get("files") == ["big.bin"] for e in events)


def test_the_run_push_limit_refuses_the_turn_that_would_pass_it(shop, remote, upstream, settings):
    settings.AGENTS_CODING_MAX_FILE_MB = 2
    settings.AGENTS_CODING_MAX_PUSH_MB = 2
    started, run, events = _run(
        shop, upstream,
        Reply(content="One", tool_calls=[("run", {"command": "head -c 1200000 /dev/urandom > one.bin"})]),
        Reply(content="Two", tool_calls=[("run", {"command": "head -c 1200000 /dev/urandom > two.bin"})]),
        Reply(tool_calls=[("finish", {"summary": "done"})]),
    )
    assert run.status == "ok", run.error
    assert _tree(remote, started["branch"]) == ["README.md", "one.bin"]
    told = _told(upstream)
    assert len(told) == 1 and "2.0 MiB push limit" in told[0] and "two.bin" in told[0]


def test_working_copy_cap_is_told_then_ends_the_run(shop, remote, upstream, settings):
    settings.AGENTS_CODING_MAX_REPO_MB = 1
    started, run, events = _run(
        shop, upstream,
        Reply(content="Big", tool_calls=[("run", {"command": "head -c 1200000 /dev/zero > z.bin"})]),
        Reply(content="Still big", tool_calls=[("run", {"command": "echo x > y.txt"})]),
        Reply(tool_calls=[("finish", {"summary": "never reached"})]),
    )
    assert run.status == "error" and "working copy grew past 1 MiB" in run.error
    told = _told(upstream)
    assert len(told) == 1 and "over the 1.0 MiB a coding run may use" in told[0]
    with shop.context():
        assert CodingRun.objects.get(pk=started["runId"]).pushed is False
    assert started["branch"] not in git("--git-dir", str(remote), "branch", "--list")


def test_links_outside_the_working_copy_are_never_committed(shop, remote, upstream):
    started, run, events = _run(
        shop, upstream,
        Reply(content="Links", tool_calls=[("run", {"command": "ln -s /etc/passwd pw && ln -s / root && ln -s ../.. up && ln -s README.md readme-link"})]),
        Reply(tool_calls=[("finish", {"summary": "links"})]),
    )
    assert run.status == "ok", run.error
    assert sorted(_tree(remote, started["branch"])) == ["README.md", "readme-link"]
    told = _told(upstream)
    assert len(told) == 1 and "pw -> /etc/passwd" in told[0] and "root -> /" in told[0] and "up -> ../.." in told[0]


def test_a_finish_in_a_turn_that_was_not_committed_is_not_the_end(shop, remote, upstream, settings):
    """The model is told at that turn so it can fix it: a `finish` beside the refused changes would
    end the run `ok` with the turn's work silently dropped, so the run goes on for one more turn."""
    settings.AGENTS_CODING_MAX_FILE_MB = 1
    started, run, events = _run(
        shop, upstream,
        Reply(content="Add data", tool_calls=[("run", {"command": "head -c 1500000 /dev/urandom > big.bin && echo s > small.txt"}),
                                              ("finish", {"summary": "data added"})]),
        Reply(content="Drop the big file", tool_calls=[("run", {"command": "rm big.bin"}), ("finish", {"summary": "small only"})]),
    )
    assert run.status == "ok", run.error
    assert run.output.startswith("small only")
    assert _tree(remote, started["branch"]) == ["README.md", "small.txt"]
    assert [e["subject"] for e in events if e["kind"] == "commit"] == ["Drop the big file"]
    told = _told(upstream)
    assert len(told) == 2 and "big.bin (1.4 MiB)" in told[0] and "finish was not accepted" in told[1]
    assert len(upstream.chat_requests) == 2
