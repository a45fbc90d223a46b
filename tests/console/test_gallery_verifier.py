"""Verify a build from anywhere (issue 57 item 2): the build page's verifier, downloaded over HTTP from
a live daphne, is byte for byte `toolkit/verify_build.py`, and run by a plain Python (Debian's
`/usr/bin/python3 -I`: no project on `sys.path`, no Django, no httpx) from a fresh clone of the
pushed branch in a temporary directory it answers 0 for a faithful branch, 1 for a rewritten one
and 2 for a build the server does not know or a usage error.

The build is made by hand here (a bare remote, commits carrying the trailers, the session's
`commit` turns and closing `log`, published): the coding engine that makes real ones has its own
tests (tests/runner/test_verify.py runs the page's recipe against one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from sessions import services as sessions
from toolkit import verify_build

pytestmark = pytest.mark.django_db(transaction=True)

PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
GIT_ENV = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "agent",
           "GIT_AUTHOR_EMAIL": "agent@example.com", "GIT_COMMITTER_NAME": "agent", "GIT_COMMITTER_EMAIL": "agent@example.com"}


def git(*args, cwd=None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def build(make_org, tmp_path):
    """A published build of `shop` whose branch (two commits with trailers) is pushed to a bare remote."""
    org = make_org("vf")
    with org.context():
        session = sessions.session_create(agent="coding-dev", actor="crawler", title="Add a cart", repo="acme/shop", project="shop")
    remote, work = tmp_path / "remote.git", tmp_path / "work"
    git("init", "-q", "--bare", "-b", "main", str(remote))
    git("clone", "-q", str(remote), str(work))
    (work / "README.md").write_text("shop\n")
    git("add", ".", cwd=work)
    git("commit", "-q", "-m", "start", cwd=work)
    git("push", "-q", "origin", "main", cwd=work)
    branch = f"agents/{session.id}"
    git("checkout", "-q", "-b", branch, cwd=work)
    shas = []
    for turn, name in ((2, "cart.py"), (4, "total.py")):
        (work / name).write_text(f"# {name}\n")
        git("add", ".", cwd=work)
        git("commit", "-q", "-m", f"Add {name}\n\n{verify_build.SESSION_TRAILER}: {session.id}\n{verify_build.TURN_TRAILER}: {turn}", cwd=work)
        shas.append((git("rev-parse", "HEAD", cwd=work), turn))
    git("push", "-q", "origin", branch, cwd=work)
    with org.context():
        for sha, turn in shas:
            sessions.session_append_event(session_id=session.id, kind="message", actor="crawler", payload={"role": "assistant", "text": "writing"})
            sessions.session_append_event(session_id=session.id, kind="commit", actor="crawler",
                                          payload={"text": "Add", "commit": sha, "subject": "Add", "turn": turn})
        sessions.session_append_event(session_id=session.id, kind="log", actor="crawler",
                                      payload={"runId": "run_x", "status": "ok", "branch": branch, "commitSha": shas[-1][0]})
        sessions.session_end(session_id=session.id, status="done")
        sessions.session_update(session_id=session.id, published=True, project="shop")
    return {"org": org, "session": session.id, "branch": branch, "remote": remote, "shas": shas}


def _run(script: Path, cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """Run the downloaded file as a user would: a plain interpreter, isolated (`-I`), from `cwd`."""
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run([PYTHON, "-I", str(script), *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_downloaded_verifier_runs_from_a_fresh_clone_with_no_project_on_the_path(build, console_server, tmp_path):
    downloaded = httpx.get(f"{console_server.url}/builds/verify.py", timeout=30)
    assert downloaded.status_code == 200
    assert downloaded.content == Path(verify_build.__file__).read_bytes()  # byte-identical to the tested module
    assert 'filename="agents-verify.py"' in downloaded.headers["content-disposition"]
    page = httpx.get(f"{console_server.url}/builds/{build['org'].slug}/shop/{build['session']}/", timeout=30).text
    assert 'href="/builds/verify.py"' in page

    clone = tmp_path / "fresh" / "shop"
    clone.parent.mkdir()
    git("clone", "-q", "--single-branch", "-b", "main", f"file://{build['remote']}", str(clone))
    script = clone / "agents-verify.py"
    script.write_bytes(downloaded.content)
    address = f"{console_server.url}/builds/{build['org'].slug}/shop/{build['session']}/"

    ok = _run(script, clone, address, "--repo", ".")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.strip() == f"ok: 2 commit(s) of {build['session']} on {build['branch']} match the published log"
    assert ok.stderr == ""

    # The remote's branch rewritten (a trailer edited, force-pushed): 1, one line per mismatch.
    work = tmp_path / "rewrite"
    git("clone", "-q", f"file://{build['remote']}", str(work))
    git("checkout", "-q", "-B", build["branch"], f"origin/{build['branch']}", cwd=work)
    git("commit", "-q", "--amend", "-m", f"Add total.py\n\n{verify_build.SESSION_TRAILER}: {build['session']}\n{verify_build.TURN_TRAILER}: 9", cwd=work)
    git("push", "-q", "--force", "origin", f"{build['branch']}:{build['branch']}", cwd=work)
    mismatch = _run(script, clone, address, "--repo", ".")
    assert mismatch.returncode == 1, mismatch.stdout + mismatch.stderr
    assert f"missing: commit {build['shas'][1][0]} (turn 4)" in mismatch.stdout and "unpublished: commit" in mismatch.stdout

    # A build the server does not know, and a usage error: 2 (never 1, the code of a real mismatch).
    unknown = _run(script, clone, f"{console_server.url}/builds/{build['org'].slug}/shop/sess_0123456789abcdef/", "--repo", ".")
    assert unknown.returncode == 2 and unknown.stdout.startswith("cannot verify:") and "404" in unknown.stdout
    usage = _run(script, clone, address)
    assert usage.returncode == 2 and "--repo" in usage.stderr
    unreachable = _run(script, clone, "http://127.0.0.1:9/builds/x/y/z/", "--repo", ".")
    assert unreachable.returncode == 2 and unreachable.stdout.startswith("cannot verify: cannot read")


def test_python_m_runner_verify_runs_the_same_file(build, console_server, tmp_path):
    clone = tmp_path / "clone"
    git("clone", "-q", f"file://{build['remote']}", str(clone))
    address = f"{console_server.url}/builds/{build['org'].slug}/shop/{build['session']}/"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "runner", "verify", address, "--repo", str(clone)], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("ok: 2 commit(s)")
