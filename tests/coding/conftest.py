"""Fixtures of the coding tests: a bare repository on disk as the remote, allowed file roots,
a registered repo, funded orgs, and helpers to run a coding run's task in-process."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from billing.services import credit_add

GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": "/nonexistent", "PATH": "/usr/bin:/bin",
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def git(*args: str, cwd: Path | None = None) -> str:
    """Run the test's own git (never the platform's) and return its stdout."""
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout


@pytest.fixture(autouse=True)
def coding_settings(settings, tmp_path):
    """Fast retries, a short pause poll, file remotes allowed under tmp_path/remotes, work dir in tmp_path."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.AGENTS_RETRY_BASE_SECONDS = 0.001
    settings.AGENTS_RETRY_MAX_SECONDS = 0.004
    settings.AGENTS_FAILOVER_MODEL = ""
    settings.AGENTS_CONTROL_POLL_SECONDS = 0.05
    settings.CLOUD_AGENT_FEE_CENTS = 100
    settings.AGENTS_CODING_FEE_CENTS = -1
    settings.AGENTS_CODING_MAX_CONCURRENT = 2
    settings.AGENTS_REPO_CREDENTIALS = ""
    settings.AGENTS_REPO_ALLOW_HOSTS = []
    (tmp_path / "remotes").mkdir()
    settings.AGENTS_REPO_FILE_ROOTS = [str(tmp_path / "remotes")]
    settings.AGENTS_CODING_WORK_DIR = str(tmp_path / "work")
    return settings


@pytest.fixture
def remote(tmp_path) -> Path:
    """A bare repository under the allowed root with one commit on `main` (README.md)."""
    bare = tmp_path / "remotes" / "shop.git"
    git("init", "-q", "--bare", "-b", "main", str(bare))
    seed = tmp_path / "seed"
    git("clone", "-q", str(bare), str(seed))
    (seed / "README.md").write_text("# shop\n")
    git("add", "README.md", cwd=seed)
    git("commit", "-q", "-m", "first", cwd=seed)
    git("push", "-q", "origin", "HEAD:refs/heads/main", cwd=seed)
    return bare


def fund(org, cents: int = 10_000) -> None:
    """Credit `org` (an OrgHandle) with `cents`."""
    credit_add(org=org.org, cents=cents, actor="test")


def register(org, remote: Path, repo: str = "acme/shop", **fields):
    """POST /v1/agents/repos for `remote` as `repo`; return the response."""
    owner, name = repo.split("/")
    body = {"owner": owner, "name": name, "cloneUrl": f"file://{remote}", **fields}
    return org.client.post("/v1/agents/repos", body, content_type="application/json")


@pytest.fixture
def shop(org_a, remote):
    """org_a, funded, with `acme/shop` registered for `remote`."""
    fund(org_a)
    response = register(org_a, remote)
    assert response.status_code == 201, response.content
    return org_a


def start(org, **body):
    """POST /v1/agents/coding; return the response."""
    return org.client.post("/v1/agents/coding", {"repo": "acme/shop", "prompt": "add a test", **body}, content_type="application/json")


def execute(org, run_id: str) -> str:
    """Run the queued coding run's task in-process (what a django-q2 worker does); return its status."""
    from coding.tasks import execute_coding_run

    return execute_coding_run(org.slug, run_id)
