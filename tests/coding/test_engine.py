"""A coding run end to end against real git (a bare repository on disk) and the loopback
OpenAI-compatible upstream issuing the tool calls (issue 14 items 2 and 3)."""

from __future__ import annotations

import json

import pytest

from runs.models import Run
from coding.models import CodingRun
from coding.sandbox import get_sandbox
from sessions.models import Event
from sessions.provenance import parse_links
from tests.coding.conftest import execute, git, start
from tests.support.upstream import Reply

pytestmark = pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed (scripts/test-prereqs.sh)")

TEST_FILE = "def test_add():\n    assert 1 + 1 == 2\n\nif __name__ == '__main__':\n    test_add()\n    print('PASSED')\n"


def _events(org, session_id: str) -> list[Event]:
    with org.context():
        return list(Event.objects.filter(session_id=session_id).order_by("seq"))


def _run(org, run_id: str) -> Run:
    with org.context():
        return Run.objects.get(pk=run_id)


def _remote_log(remote, branch: str) -> str:
    return git("--git-dir", str(remote), "log", "--format=%x00%H%n%B%n%N", branch)


def _started(shop, **body) -> dict:
    response = start(shop, **body)
    assert response.status_code == 202, response.content
    return response.json()


def test_run_writes_a_file_runs_a_test_and_pushes_its_branch(shop, remote, upstream):
    upstream.script(
        Reply(content="Add a test of addition", tool_calls=[("write_file", {"path": "tests/test_add.py", "content": TEST_FILE})]),
        Reply(tool_calls=[("run", {"command": "python3 tests/test_add.py"})]),
        Reply(content="Document the test", tool_calls=[("edit_file", {"path": "README.md", "search": "# shop\n", "replace": "# shop\n\nRun tests/test_add.py.\n"})]),
        Reply(tool_calls=[("finish", {"summary": "Added a test and documented it"})]),
    )
    started = _started(shop)
    assert started["branch"].startswith("agents/") and started["repo"] == "acme/shop" and started["routed"] is False
    assert started["branch"] == "agents/" + started["sessionId"].split("_", 1)[1][:12]

    status = execute(shop, started["runId"])
    run = _run(shop, started["runId"])
    assert status == "ok", (run.error, [e.payload for e in _events(shop, started["sessionId"])])
    assert run.status == "ok" and run.kind == "coding"
    assert started["branch"] in run.output and "2 files changed" in run.output
    events = _events(shop, started["sessionId"])
    tool_calls = [e for e in events if e.kind == "tool-call"]
    assert [json.loads(e.payload)["name"] for e in tool_calls] == ["write_file", "run", "edit_file", "finish"]
    assert "PASSED" in json.loads(tool_calls[1].payload)["result"]
    commits = [json.loads(e.payload) for e in events if e.kind == "commit"]
    assert [c["subject"] for c in commits] == ["Add a test of addition", "Document the test"]

    # The remote has the branch: one commit per changing turn, both trailers, turn = that turn's tool-call seq.
    links = parse_links(_remote_log(remote, started["branch"]))
    assert [(l.session, l.turn) for l in reversed(links)] == [
        (started["sessionId"], tool_calls[0].seq), (started["sessionId"], tool_calls[2].seq)
    ]
    assert [l.commit for l in reversed(links)] == [c["commit"] for c in commits]
    assert git("--git-dir", str(remote), "show", f"{started['branch']}:tests/test_add.py") == TEST_FILE
    assert git("--git-dir", str(remote), "log", "-1", "--format=%an", started["branch"]).strip() == "coding-dev"
    with shop.context():
        coding = CodingRun.objects.get(pk=started["runId"])
    assert coding.pushed and coding.changed and coding.head_sha == links[0].commit
    final = json.loads(events[-1].payload)
    assert final["changed"] is True and final["branch"] == started["branch"] and final["commitSha"] == coding.head_sha


def test_after_continues_from_the_earlier_branch(shop, remote, upstream):
    upstream.script(
        Reply(content="Add notes", tool_calls=[("write_file", {"path": "NOTES.md", "content": "one\n"})]),
        Reply(tool_calls=[("finish", {"summary": "notes"})]),
    )
    first = _started(shop)
    assert execute(shop, first["runId"]) == "ok"
    upstream.script(
        Reply(tool_calls=[("read_file", {"path": "NOTES.md"})]),
        Reply(content="Extend notes", tool_calls=[("edit_file", {"path": "NOTES.md", "search": "one\n", "replace": "one\ntwo\n"})]),
        Reply(tool_calls=[("finish", {"summary": "more notes"})]),
    )
    second = _started(shop, after=first["sessionId"])
    assert execute(shop, second["runId"]) == "ok"
    assert git("--git-dir", str(remote), "show", f"{second['branch']}:NOTES.md") == "one\ntwo\n"
    read = [json.loads(e.payload) for e in _events(shop, second["sessionId"]) if e.kind == "tool-call"][0]
    assert read["result"] == "one\n"
    first_head = git("--git-dir", str(remote), "rev-parse", first["branch"]).strip()
    assert git("--git-dir", str(remote), "rev-parse", f"{second['branch']}~1").strip() == first_head


def test_run_that_changes_nothing_pushes_nothing(shop, remote, upstream):
    upstream.script(Reply(tool_calls=[("list_files", {})]), Reply(tool_calls=[("finish", {"summary": "nothing to do"})]))
    started = _started(shop)
    assert execute(shop, started["runId"]) == "ok"
    final = json.loads(_events(shop, started["sessionId"])[-1].payload)
    assert final["changed"] is False and final["pushed"] is False
    assert started["branch"] not in git("--git-dir", str(remote), "branch", "--list")


def test_non_fast_forward_push_ends_in_error_with_gits_reason(shop, remote, upstream, tmp_path):
    upstream.script(
        Reply(content="Add a file", tool_calls=[("write_file", {"path": "a.txt", "content": "a\n"})]),
        Reply(tool_calls=[("finish", {"summary": "a"})]),
    )
    started = _started(shop)
    # Someone else pushes the same branch name first, from an unrelated history.
    other = tmp_path / "other"
    git("init", "-q", "-b", "x", str(other))
    (other / "b.txt").write_text("b\n")
    git("add", "b.txt", cwd=other)
    git("commit", "-q", "-m", "elsewhere", cwd=other)
    git("push", "-q", str(remote), f"HEAD:refs/heads/{started['branch']}", cwd=other)

    assert execute(shop, started["runId"]) == "error"
    run = _run(shop, started["runId"])
    assert "rejected" in run.error and ("non-fast-forward" in run.error or "fetch first" in run.error)
    final = json.loads(_events(shop, started["sessionId"])[-1].payload)
    assert len(final["commits"]) == 1 and final["commits"][0]["subject"] == "Add a file"
    assert final["pushed"] is False and final["changed"] is True


def test_edit_with_absent_search_text_is_an_error_to_the_model(shop, upstream):
    upstream.script(
        Reply(tool_calls=[("edit_file", {"path": "README.md", "search": "not there", "replace": "x"})]),
        Reply(tool_calls=[("finish", {"summary": "gave up"})]),
    )
    started = _started(shop)
    assert execute(shop, started["runId"]) == "ok"
    call = [json.loads(e.payload) for e in _events(shop, started["sessionId"]) if e.kind == "tool-call"][0]
    assert call["error"] is True and call["result"].startswith("error: the search text was not found in README.md")
    tool_message = [m for m in upstream.chat_requests[1]["messages"] if m["role"] == "tool"][0]
    assert tool_message["content"].startswith("error: the search text was not found")


def test_paths_leaving_the_working_copy_are_refused(shop, upstream):
    upstream.script(
        Reply(tool_calls=[
            ("read_file", {"path": "../../etc/passwd"}),
            ("write_file", {"path": "/tmp/evil.txt", "content": "x"}),
            ("write_file", {"path": "ok/../../x.txt", "content": "x"}),
            ("list_files", {"path": ".."}),
            ("search", {"query": "root", "path": "/etc"}),
            ("edit_file", {"path": ".git/config", "search": "a", "replace": "b"}),
        ]),
        Reply(tool_calls=[("finish", {"summary": "done"})]),
    )
    started = _started(shop)
    assert execute(shop, started["runId"]) == "ok"
    calls = [json.loads(e.payload) for e in _events(shop, started["sessionId"]) if e.kind == "tool-call"][:6]
    assert all(c["error"] is True and c["result"].startswith("error: ") for c in calls), calls
    assert not __import__("os").path.exists("/tmp/evil.txt")


def test_credential_written_into_a_file_is_refused_before_commit(shop, remote, upstream):
    key = "AKIA" + "Q3EGRIL7PXZ5NMTV"
    secret = f"aws_access_key_id = {key}\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY9\n"
    upstream.script(
        Reply(content="Add config", tool_calls=[("write_file", {"path": "config.ini", "content": secret})]),
        Reply(content="Use the environment instead", tool_calls=[("write_file", {"path": "config.ini", "content": "aws_profile = default\n"})]),
        Reply(tool_calls=[("finish", {"summary": "config without secrets"})]),
    )
    started = _started(shop)
    assert execute(shop, started["runId"]) == "ok"
    events = _events(shop, started["sessionId"])
    refusals = [json.loads(e.payload) for e in events if e.kind == "log" and "refused to commit" in json.loads(e.payload).get("text", "")]
    assert len(refusals) == 1 and refusals[0]["findings"]
    told = [m["content"] for m in upstream.chat_requests[1]["messages"] if m["role"] == "user"]
    assert any("refused to commit" in text for text in told)
    history = git("--git-dir", str(remote), "log", "-p", started["branch"])
    assert key not in history
    assert [json.loads(e.payload)["subject"] for e in events if e.kind == "commit"] == ["Use the environment instead"]


def test_masked_placeholder_is_never_written(shop, upstream):
    upstream.script(
        Reply(tool_calls=[("write_file", {"path": "a.env", "content": "TOKEN=[redacted:github-token]\n"})]),
        Reply(tool_calls=[("finish", {"summary": "x"})]),
    )
    started = _started(shop)
    assert execute(shop, started["runId"]) == "ok"
    call = [json.loads(e.payload) for e in _events(shop, started["sessionId"]) if e.kind == "tool-call"][0]
    assert call["error"] is True and "placeholder" in call["result"]
    final = json.loads(_events(shop, started["sessionId"])[-1].payload)
    assert final["changed"] is False


def test_published_build_shows_commits_per_turn_and_verify_rederives_them(shop, remote, upstream):
    import subprocess

    upstream.script(
        Reply(content="Add a", tool_calls=[("write_file", {"path": "a.txt", "content": "a\n"})]),
        Reply(content="Add b", tool_calls=[("write_file", {"path": "b.txt", "content": "b\n"})]),
        Reply(tool_calls=[("finish", {"summary": "a and b"})]),
    )
    started = _started(shop, project="shop-build")
    assert execute(shop, started["runId"]) == "ok"
    patched = shop.client.patch(f"/v1/agents/sessions/{started['sessionId']}", {"published": True}, content_type="application/json")
    assert patched.status_code == 200, patched.content
    build = shop.client.get(f"/v1/agents/builds/{shop.slug}/shop-build").json()
    assert build["repo"] == "acme/shop"
    with_commits = [t for t in build["turns"] if t.get("commit")]
    assert [t["subject"] for t in with_commits] == ["Add a", "Add b"]
    # `verify`'s recipe, run in a fresh clone of the remote, re-derives every binding from git alone.
    clone = remote.parent.parent / "fresh"
    git("clone", "-q", f"file://{remote}", str(clone))
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"}
    lines = []
    for command in [line for line in build["verify"].splitlines() if line.startswith("git ")]:
        lines = subprocess.run(command, shell=True, cwd=clone, capture_output=True, text=True, check=True, env=env).stdout.split("\n")
    bindings = [tuple(line.split()) for line in lines if line.strip()]
    tool_turns = [t["turn"] for t in build["turns"] if t["kind"] == "tool-call"]
    assert bindings == [(t["commit"], started["sessionId"], str(turn)) for t, turn in zip(with_commits, tool_turns[:2])]
