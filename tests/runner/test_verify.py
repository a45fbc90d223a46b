"""`python -m runner verify` (issue 30 item 1): a coding build's bindings re-derived from a fresh
clone of the remote (a separate bare repository reached by a plain `git clone`, no shared
objects, no notes) and compared with the published log — faithful → 0; an edited trailer, a
rebased branch, a force-pushed remote → 1 with a line per mismatch.

The published log is read through the real API views (Django's test client stands in for the
network between the command and the server: `toolkit.verify_build._get` is routed to it). The
downloaded file run from a clone over real HTTP is tests/toolkit/test_verify_build.py."""

from __future__ import annotations

import html
import io
import re
import shlex
import subprocess
from contextlib import redirect_stdout
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from coding.sandbox import get_sandbox
from toolkit import verify_build as verify_module
from runner.cli import main
from tests.coding.conftest import coding_settings, execute, git, remote, shop, start  # noqa: F401  (fixtures)
from tests.support.upstream import Reply

pytestmark = pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed")


@pytest.fixture
def build(shop, remote, upstream, monkeypatch):  # noqa: F811
    """A published coding build with two commits; the verifier reads the server through the test client."""
    upstream.script(
        Reply(content="Add a", tool_calls=[("write_file", {"path": "a.txt", "content": "a\n"})]),
        Reply(content="Add b", tool_calls=[("write_file", {"path": "b.txt", "content": "b\n"})]),
        Reply(tool_calls=[("finish", {"summary": "a and b"})]),
    )
    started = start(shop, project="verified").json()
    assert execute(shop, started["runId"]) == "ok"
    assert shop.client.patch(f"/v1/agents/sessions/{started['sessionId']}", {"published": True},
                             content_type="application/json").status_code == 200
    from django.test import Client

    def through_client(url, *, headers=None, timeout):
        parts = urlsplit(url)
        extra = {"HTTP_AUTHORIZATION": headers["Authorization"]} if headers and "Authorization" in headers else {}
        response = Client().get(parts.path + (f"?{parts.query}" if parts.query else ""), **extra)
        if response.status_code != 200:
            raise verify_module.Unusable(f"{url} answered {response.status_code}")
        return response.json()

    monkeypatch.setattr(verify_module, "_get", through_client)
    page = Client().get(f"/v1/agents/builds/{shop.slug}/verified/{started['sessionId']}").json()
    return {**started, "page": page, "url": f"http://testserver{page['url']}"}


def _verify(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out):
        status = main(["verify", *argv])
    return status, out.getvalue()


def _fresh_clone(remote, tmp_path, name: str = "clone"):  # noqa: F811
    clone = tmp_path / name
    git("clone", "-q", f"file://{remote}", str(clone))  # file:// — objects copied, nothing shared
    return clone


def _rewrite(remote, tmp_path, branch: str, script: str) -> None:  # noqa: F811
    """Rewrite `branch` of the remote in a scratch clone with shell `script`, then force-push it."""
    work = _fresh_clone(remote, tmp_path, "rewrite")
    git("checkout", "-q", "-B", branch, f"origin/{branch}", cwd=work)
    subprocess.run(script, shell=True, cwd=work, check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "x",
                        "GIT_AUTHOR_EMAIL": "x@x", "GIT_COMMITTER_NAME": "x", "GIT_COMMITTER_EMAIL": "x@x", "GIT_EDITOR": "true"})
    git("push", "-q", "--force", "origin", f"{branch}:{branch}", cwd=work)


def test_the_page_recipe_runs_as_pasted_in_a_fresh_clone(build, remote, tmp_path, monkeypatch):  # noqa: F811
    clone = tmp_path / "main-only"
    git("clone", "-q", "--single-branch", "-b", "main", f"file://{remote}", str(clone))
    assert build["branch"] not in git("branch", "-a", cwd=clone)  # only main: the recipe must fetch the run's branch
    recipe = build["page"]["verify"]
    from django.test import Client

    shown = re.search(r'<pre class="pre" id="verify">(.*?)</pre>', Client().get(build["page"]["url"]).content.decode(), re.S)
    assert shown is not None and html.unescape(shown.group(1)) == recipe  # the page prints what the API says
    output, verdict = "", None
    for line in recipe.splitlines():
        if line.startswith("#"):
            continue
        if line.startswith("curl "):  # the download, through the test client: the verifier's own bytes
            argv = shlex.split(line)
            assert argv[-1] == "http://testserver/builds/verify.py" and argv[argv.index("-o") + 1] == "agents-verify.py"
            assert Client().get("/builds/verify.py").content == Path(verify_module.__file__).read_bytes()
            continue
        if line.startswith("python3 agents-verify.py "):  # in-process: the test client stands in for the network
            argv = shlex.split(line)[2:]
            assert argv[:1] == [build["url"]]  # the page's own absolute address, no placeholder to fill in
            monkeypatch.chdir(clone)
            verdict = _verify(*argv)
            continue
        assert line.startswith("git "), line
        output = subprocess.run(line, shell=True, cwd=clone, check=True, capture_output=True, text=True,
                                env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1"}).stdout
    commits = [t for t in build["page"]["turns"] if t["kind"] == "commit"]
    assert [tuple(line.split()) for line in output.splitlines()] == [(c["commit"], build["sessionId"], str(c["forTurn"])) for c in commits]
    assert verdict is not None and verdict[0] == 0, verdict
    assert verdict[1].startswith("ok: 2 commit(s)")


def test_a_faithful_clone_verifies(build, remote, tmp_path, shop):  # noqa: F811
    clone = _fresh_clone(remote, tmp_path)
    status, out = _verify(build["url"], "--repo", str(clone))
    assert status == 0, out
    assert out.strip() == f"ok: 2 commit(s) of {build['sessionId']} on {build['branch']} match the published log"
    status, out = _verify(build["url"], "--repo", f"file://{remote}")  # the remote's URL itself
    assert status == 0, out
    status, out = _verify(build["sessionId"], "--repo", str(clone), "--server", "http://testserver", "--api-key", shop.key)
    assert status == 0, out


def test_an_edited_trailer_fails(build, remote, tmp_path):  # noqa: F811
    turn = [t for t in build["page"]["turns"] if t["kind"] == "commit"][-1]["forTurn"]
    _rewrite(remote, tmp_path, build["branch"],
             f"git log -1 --format=%B | sed 's/^Agents-Turn: {turn}$/Agents-Turn: {turn + 1}/' | git commit -q --amend -F -")
    status, out = _verify(build["url"], "--repo", str(_fresh_clone(remote, tmp_path)))
    assert status == 1
    lines = out.strip().splitlines()
    assert any(line.startswith("missing: commit ") and f"(turn {turn})" in line for line in lines)
    assert any(line.startswith("unpublished: commit ") and f"claims turn {turn + 1}" in line for line in lines)
    assert any(line.startswith("head: ") for line in lines)
    assert lines[-1].startswith("3 mismatch(es)")


def test_a_rebased_branch_fails(build, remote, tmp_path):  # noqa: F811
    seed = _fresh_clone(remote, tmp_path, "seed2")
    (seed / "c.txt").write_text("c\n")
    git("add", "c.txt", cwd=seed)
    git("commit", "-q", "-m", "main moves on", cwd=seed)
    git("push", "-q", "origin", "HEAD:main", cwd=seed)
    _rewrite(remote, tmp_path, build["branch"], "git rebase -q origin/main")
    status, out = _verify(build["url"], "--repo", str(_fresh_clone(remote, tmp_path)))
    assert status == 1
    assert sum(line.startswith("missing: ") for line in out.splitlines()) == 2
    assert sum(line.startswith("unpublished: ") for line in out.splitlines()) == 2


def test_a_force_pushed_remote_fails_even_for_an_older_clone(build, remote, tmp_path):  # noqa: F811
    clone = _fresh_clone(remote, tmp_path)
    git("fetch", "-q", "origin", f"+refs/heads/{build['branch']}:refs/remotes/origin/{build['branch']}", cwd=clone)
    _rewrite(remote, tmp_path, build["branch"], "git reset -q --hard HEAD~1")
    status, out = _verify(build["url"], "--repo", str(clone))  # the clone had the faithful branch: verify fetches again
    assert status == 1
    lines = out.splitlines()
    assert len([line for line in lines if line.startswith("missing: ")]) == 1 and any(line.startswith("head: ") for line in lines)


def test_an_unknown_build_or_repo_is_unusable_not_a_pass(build, remote, tmp_path):  # noqa: F811
    status, out = _verify(build["url"].replace(build["sessionId"], "sess_unknown"), "--repo", str(remote))
    assert status == 2 and out.startswith("cannot verify:")
    status, out = _verify(build["url"], "--repo", str(tmp_path / "nowhere"))
    assert status == 2 and out.startswith("cannot verify:")
