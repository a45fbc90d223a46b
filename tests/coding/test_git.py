"""The platform's git never runs what a repository, a command or the server's config names
(issue 14 item 3): hooks, filters, fsmonitor and credential helpers stay dead."""

from __future__ import annotations

from pathlib import Path

import pytest

from coding import git as gitops
from coding.git import Git, GitError, valid_branch
from tests.coding.conftest import git


@pytest.fixture
def hostile_remote(tmp_path) -> Path:
    """A bare repo whose content names a clean/smudge filter and a diff driver."""
    root = tmp_path / "remotes"
    root.mkdir(exist_ok=True)
    bare = root / "hostile.git"
    git("init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed-hostile"
    git("init", "-q", "-b", "main", str(seed))
    (seed / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (seed / "a.txt").write_text("a\n")
    git("add", "-A", cwd=seed)
    git("commit", "-q", "-m", "seed", cwd=seed)
    git("push", "-q", str(bare), "HEAD:refs/heads/main", cwd=seed)
    return bare


def test_server_config_and_hooks_never_run(hostile_remote, tmp_path, monkeypatch):
    marker = tmp_path / "PWNED"
    hooks = tmp_path / "evil-hooks"
    hooks.mkdir()
    for name in ("pre-commit", "post-commit", "post-checkout", "reference-transaction", "pre-push"):
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
        hook.chmod(0o755)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[filter \"evil\"]\n\tclean = touch {marker}\n\tsmudge = touch {marker}\n[core]\n\thooksPath = {hooks}\n\tfsmonitor = touch {marker}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(hooks))

    workspace = gitops.workspace_create(str(tmp_path / "work"))
    try:
        g = Git(workspace, allow_file=True)
        g.clone(f"file://{hostile_remote}", max_bytes=50 * 1024 * 1024)
        g.checkout_new_branch("agents/x", "refs/remotes/origin/main")
        # What a sandboxed command could do to the working copy: plant a .git with hooks and config.
        planted = workspace.work / ".git"
        (planted / "hooks").mkdir(parents=True)
        (planted / "config").write_text(f"[core]\n\tfsmonitor = touch {marker}\n\thooksPath = {hooks}\n")
        (planted / "hooks" / "pre-commit").write_text(f"#!/bin/sh\ntouch {marker}\n")
        (planted / "hooks" / "pre-commit").chmod(0o755)
        (workspace.work / "a.txt").write_text("changed\n")
        assert g.changed()
        diff = g.stage_all()
        assert "changed" in diff
        sha = g.commit(message="subject\n\nAgents-Session: sess_x\nAgents-Turn: 3\n", author_name="bot", author_email="bot@agents.invalid")
        assert g.diffstat(f"{sha}~1", sha)
        g.push(f"file://{hostile_remote}", "agents/x")
        files = g.run("ls-tree", "-r", "--name-only", sha).stdout.split()
        assert ".git/config" not in files and not any(f.startswith(".git/") for f in files)
    finally:
        gitops.workspace_remove(workspace)
    assert not marker.exists()
    assert not workspace.root.exists()


def test_file_transport_is_off_unless_the_remote_is_a_file_url(hostile_remote, tmp_path):
    workspace = gitops.workspace_create(str(tmp_path / "work"))
    try:
        with pytest.raises(GitError):
            Git(workspace, allow_file=False).clone(f"file://{hostile_remote}", max_bytes=50 * 1024 * 1024)
    finally:
        gitops.workspace_remove(workspace)


def test_clone_larger_than_the_bound_is_refused(hostile_remote, tmp_path):
    workspace = gitops.workspace_create(str(tmp_path / "work"))
    try:
        with pytest.raises(GitError) as caught:
            Git(workspace, allow_file=True).clone(f"file://{hostile_remote}", max_bytes=10)
        assert "larger than" in caught.value.reason
    finally:
        gitops.workspace_remove(workspace)


@pytest.mark.parametrize("name, ok", [
    ("main", True), ("feature/x-1", True), ("-delete", False), ("a..b", False), ("x.lock", False), ("a b", False), ("", False),
])
def test_branch_names(name, ok):
    assert valid_branch(name) is ok


@pytest.fixture
def forge(tmp_path, monkeypatch):
    """An HTTPS listener on 127.0.0.1 with a certificate for forge.test; the outbound resolver answers 127.0.0.1 for any name."""
    from tests.support.tls import TlsServer, make_ca
    from toolkit import outbound

    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr(outbound, "system_resolver", resolver)
    server = TlsServer(make_ca(tmp_path, "forge.test")).start()
    server.lookups = lookups
    yield server
    server.stop()


def test_an_https_clone_connects_to_the_checked_address_keeping_the_name_for_tls(forge, tmp_path, settings):
    """git cannot resolve forge.test itself: the handshake reaching 127.0.0.1 with SNI forge.test is the pin at work."""
    settings.AGENTS_REPO_ALLOW_HOSTS = ["forge.test"]
    workspace = gitops.workspace_create(str(tmp_path / "work"))
    try:
        with pytest.raises(GitError) as caught:  # our throwaway CA is not trusted: the TLS check by name fails
            Git(workspace).clone(f"https://forge.test:{forge.port}/acme/shop.git", max_bytes=50 * 1024 * 1024)
    finally:
        gitops.workspace_remove(workspace)
    assert forge.handshakes and set(forge.handshakes) == {"forge.test"}
    assert forge.lookups == ["forge.test"]
    assert "resolve" not in caught.value.reason.lower()


def test_an_https_clone_of_a_name_resolving_inward_is_refused_before_git_connects(forge, tmp_path, settings):
    settings.AGENTS_REPO_ALLOW_HOSTS = []
    workspace = gitops.workspace_create(str(tmp_path / "work"))
    try:
        with pytest.raises(GitError) as caught:
            Git(workspace).clone(f"https://forge.test:{forge.port}/acme/shop.git", max_bytes=50 * 1024 * 1024)
        with pytest.raises(GitError):
            Git(workspace).push(f"https://forge.test:{forge.port}/acme/shop.git", "agents/x")
    finally:
        gitops.workspace_remove(workspace)
    assert "forge.test resolves to 127.0.0.1, a loopback address" in caught.value.reason  # the reason is named
    assert forge.handshakes == []


def test_a_checked_remote_pins_git_to_its_address():
    from coding.remotes import Remote

    https = Remote(url="https://git.example.com/a.git", scheme="https", host="git.example.com", port=443, address="140.82.112.3")
    assert https.pin_config() == ["-c", "http.curloptResolve=git.example.com:443:140.82.112.3", "-c", "http.followRedirects=false"]
    v6 = Remote(url="https://git.example.com/a.git", scheme="https", host="git.example.com", port=8443, address="2001:db8::7")
    assert v6.pin_config()[1] == "http.curloptResolve=git.example.com:8443:[2001:db8::7]"
    ssh = Remote(url="git@git.example.com:a.git", scheme="ssh", host="git.example.com", port=22, address="140.82.112.3")
    assert ssh.pin_config() == [] and ssh.ssh_host() == "140.82.112.3"
    assert "HostName=140.82.112.3" in gitops._ssh_command(gitops.Workspace(root=Path("/nonexistent")), remote=ssh)
