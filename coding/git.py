"""The platform's own git: a fresh working copy per run, commits with provenance, the push.

Every command runs `git --git-dir=<G> --work-tree=<W>` with the repository database `G`
*outside* the working copy `W`: the sandbox binds only `W`, so nothing a command (or a file
tool) writes can reach the config, hooks or objects the platform's git reads. On top of that:

- a scrubbed environment: none of the server's variables, `HOME` an empty directory of the
  run, `GIT_CONFIG_NOSYSTEM=1`, `GIT_CONFIG_GLOBAL=/dev/null`, `GIT_TERMINAL_PROMPT=0`, no
  `SSH_AUTH_SOCK`, so neither the server's SSH keys and agent nor its credential helpers are used;
- `-c` overrides that neutralise every setting that could run a command or reach elsewhere:
  hooks (`core.hooksPath=/dev/null`), `core.fsmonitor`, `core.editor`, `core.pager`,
  `core.askPass`, `credential.helper`, `gpg.program`, `diff.external`, `core.sshCommand`
  (ours: `ssh -F /dev/null`, no default identities, no agent), `protocol.*.allow` (https and
  ssh; file only for a URL under an allowed root), no submodule recursion, no redirects; diffs
  run with `--no-ext-diff --no-textconv`, so `.gitattributes` cannot name a filter or driver
  (and none is configured: the config is the run's own);
- bounds: clone/fetch is killed when the repository database passes `AGENTS_CODING_MAX_REPO_MB`
  or the command its timeout; `tree_bytes` lets the engine bound the working copy;
- pinned connections: before each fetch and push the remote's host is resolved once and checked
  (`coding.remotes.check_reachable`, the rules of `toolkit.outbound`), and git connects to that
  address only — `-c http.curloptResolve=host:port:ip` and `http.followRedirects=false` for
  https, `HostName=<ip>` (host key kept under the name) for ssh.

A push credential (resolved by `coding.remotes.credential_value` only here, at push time) goes
to git through `GIT_CONFIG_*` environment entries (an `http.extraHeader`, never on a command
line other users can read) or as the SSH identity file; it is never written to disk by this
module and never reaches the sandbox.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from agents_site.errors import ApiError
from coding.remotes import CredentialValue, Remote, check_reachable
from toolkit import commits

GIT_TIMEOUT_SECONDS = 120.0
_SIZE_POLL_SECONDS = 0.25
_BRANCH = re.compile(r"^[A-Za-z0-9._/-]{1,255}$")


class GitError(Exception):
    """A git operation failed; `reason` is git's own words (its last lines of stderr)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason.strip() or "git failed"
        super().__init__(self.reason)


@dataclass
class Workspace:
    """One run's directories: `root` (removed at the end), the git database, the working copy, HOME."""

    root: Path

    @property
    def git_dir(self) -> Path:
        return self.root / "git"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @property
    def home(self) -> Path:
        return self.root / "home"


def workspace_create(base_dir: str | None = None) -> Workspace:
    """Make a fresh, private run directory (0700) under `base_dir` (default: the temp dir)."""
    base = Path(base_dir) if base_dir else Path(tempfile.gettempdir()) / "agents-coding"
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    root = Path(tempfile.mkdtemp(prefix="run-", dir=base))
    workspace = Workspace(root=root)
    for path in (workspace.work, workspace.home):
        path.mkdir(mode=0o700)
    return workspace


def workspace_remove(workspace: Workspace | None) -> None:
    """Remove the run directory and everything in it (best-effort, never raises)."""
    if workspace is not None:
        shutil.rmtree(workspace.root, ignore_errors=True)


def tree_bytes(path: Path) -> int:
    """Return the bytes used by the files under `path` (links not followed)."""
    total = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def valid_branch(name: str) -> bool:
    """Return True when `name` is a branch name git accepts and no option (`-…`) in disguise."""
    if not name or not _BRANCH.fullmatch(name) or name.startswith(("-", "/")) or name.endswith(("/", ".lock", ".")):
        return False
    if ".." in name or "//" in name or "@{" in name:
        return False
    return subprocess.run(["git", "check-ref-format", "--branch", name], capture_output=True, env=_base_env(None)).returncode == 0


def _ssh_command(workspace: Workspace, key_file: str = "", remote: Remote | None = None) -> str:
    pinned = []
    if remote is not None and remote.ssh_host():
        pinned = ["-o", f"HostName={remote.ssh_host()}", "-o", f"HostKeyAlias={remote.host}"]
    parts = [
        "ssh", "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none",
        "-o", "StrictHostKeyChecking=accept-new", "-o", f"UserKnownHostsFile={workspace.home / 'known_hosts'}",
        "-o", "ProxyCommand=none", "-o", "PermitLocalCommand=no",
        "-o", f"IdentityFile={key_file or '/dev/null'}", *pinned,
    ]
    return " ".join(shlex.quote(p) for p in parts)


def _safe_config(workspace: Workspace, *, allow_file: bool, key_file: str = "", remote: Remote | None = None) -> list[str]:
    pairs = {
        "core.hooksPath": "/dev/null",
        "core.fsmonitor": "false",
        "core.editor": "true",
        "core.pager": "cat",
        "core.askPass": "",
        "core.attributesFile": "/dev/null",
        "core.excludesFile": "/dev/null",
        "core.sshCommand": _ssh_command(workspace, key_file, remote),
        "core.symlinks": "true",
        "credential.helper": "",
        "gpg.program": "false",
        "commit.gpgSign": "false",
        "tag.gpgSign": "false",
        "diff.external": "",
        "protocol.allow": "never",
        "protocol.https.allow": "always",
        "protocol.ssh.allow": "always",
        "protocol.file.allow": "always" if allow_file else "never",
        "submodule.recurse": "false",
        "fetch.recurseSubmodules": "false",
        "http.followRedirects": "false",
        "gc.auto": "0",
        "maintenance.auto": "false",
        "init.templateDir": "",
        "advice.detachedHead": "false",
        "user.useConfigOnly": "false",
    }
    argv = []
    for key, value in pairs.items():
        argv += ["-c", f"{key}={value}"]
    return argv + (remote.pin_config() if remote is not None else [])


def _base_env(workspace: Workspace | None) -> dict:
    home = str(workspace.home) if workspace else "/nonexistent"
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "LANG": "C",
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "",
        "SSH_ASKPASS": "",
        "GIT_PROTOCOL_FROM_USER": "0",
    }


class Git:
    """The platform's git over one `Workspace`; `allow_file` permits the file transport (a file: remote)."""

    def __init__(self, workspace: Workspace, *, allow_file: bool = False, timeout: float = GIT_TIMEOUT_SECONDS) -> None:
        self.workspace = workspace
        self.allow_file = allow_file
        self.timeout = timeout

    def _argv(self, args: tuple[str, ...], *, key_file: str = "", remote: Remote | None = None) -> list[str]:
        return [
            "git", "--git-dir", str(self.workspace.git_dir), "--work-tree", str(self.workspace.work),
            *_safe_config(self.workspace, allow_file=self.allow_file, key_file=key_file, remote=remote), *args,
        ]

    @staticmethod
    def remote_for(url: str) -> Remote | None:
        """Return the checked `Remote` of network URL `url` (resolved once: git is pinned to its address), None for file.

        Raises `GitError` when the URL is no longer allowed (e.g. its host now resolves inward).
        """
        if urlsplit(url).scheme == "file":
            return None
        try:
            return check_reachable(url)
        except ApiError as exc:
            raise GitError(exc.message) from exc

    def run(self, *args: str, env_extra: dict | None = None, key_file: str = "", check: bool = True,
            max_bytes: int | None = None, timeout: float | None = None, remote: Remote | None = None) -> subprocess.CompletedProcess:
        """Run one git command; return it (text). Raises `GitError` with git's reason when it fails
        (`check`), when it outlives `timeout`, or when the git database passes `max_bytes`.
        `remote` pins the network transfer to its checked address."""
        env = _base_env(self.workspace) | (env_extra or {})
        process = subprocess.Popen(
            self._argv(args, key_file=key_file, remote=remote), cwd=self.workspace.work, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        )
        deadline = time.monotonic() + (timeout or self.timeout)
        over = ""
        while True:
            try:
                out, err = process.communicate(timeout=_SIZE_POLL_SECONDS if max_bytes else max(deadline - time.monotonic(), 0.01))
                break
            except subprocess.TimeoutExpired:
                if max_bytes and tree_bytes(self.workspace.git_dir) > max_bytes:
                    over = f"the repository is larger than the {max_bytes // (1024 * 1024)} MiB a coding run may clone"
                elif time.monotonic() >= deadline:
                    over = f"git {args[0]} took longer than {int(timeout or self.timeout)} s"
                if over:
                    os.killpg(process.pid, 9)
                    process.communicate()
                    raise GitError(over) from None
        result = subprocess.CompletedProcess(process.args, process.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
        if check and result.returncode != 0:
            raise GitError(_reason(result.stderr) or f"git {args[0]} exited {result.returncode}")
        return result

    # -- setting up ------------------------------------------------------------------------
    def init(self) -> None:
        """Create the run's own git database (no template: no sample hooks)."""
        subprocess.run(
            ["git", "init", "-q", "--bare", "--template=", str(self.workspace.git_dir)],
            env=_base_env(self.workspace), check=True, capture_output=True,
        )
        self.run("config", "core.bare", "false")
        self.run("config", "core.logAllRefUpdates", "false")

    def fetch(self, url: str, refs: list[str], *, max_bytes: int) -> None:
        """Fetch `refs` (refspecs) from `url`; raise `GitError` (git's reason, or too large)."""
        self.run("fetch", "--no-tags", "--no-recurse-submodules", "--quiet", "--", url, *refs, max_bytes=max_bytes,
                 remote=self.remote_for(url))
        if tree_bytes(self.workspace.git_dir) > max_bytes:  # finished between two size checks
            raise GitError(f"the repository is larger than the {max_bytes // (1024 * 1024)} MiB a coding run may clone")

    def clone(self, url: str, *, max_bytes: int) -> None:
        """Fetch every branch of `url` into `refs/remotes/origin/*` of a new database."""
        self.init()
        self.fetch(url, ["+refs/heads/*:refs/remotes/origin/*"], max_bytes=max_bytes)

    def has_ref(self, ref: str) -> bool:
        """Return True when `ref` names a commit here."""
        return self.run("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False).returncode == 0

    def checkout_new_branch(self, branch: str, start: str) -> str:
        """Create `branch` at `start`, check it out into the working copy; return its head sha."""
        self.run("checkout", "-q", "-f", "-B", branch, start)
        return self.head()

    def head(self) -> str:
        """Return the sha of HEAD ("" when there is none)."""
        result = self.run("rev-parse", "--verify", "--quiet", "HEAD", check=False)
        return result.stdout.strip() if result.returncode == 0 else ""

    # -- changes ---------------------------------------------------------------------------
    def changed(self) -> bool:
        """Return True when the working copy differs from HEAD (untracked files included)."""
        return bool(self.run("status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all").stdout.strip())

    def status(self) -> str:
        """Return `git status` as `toolkit.commits.plan_turn` reads it (porcelain v1, NUL-separated, `.gitignore` honoured)."""
        return self.run(*commits.STATUS_ARGS).stdout

    def stage(self, paths: list[str]) -> str:
        """Stage exactly `paths` (additions, changes, deletions) and return the staged diff (no external diff, no textconv)."""
        for chunk in commits.chunks(paths):
            self.run(*commits.stage_args(chunk))
        return self.run("diff", "--cached", "--no-ext-diff", "--no-textconv", "--no-color", "-U0").stdout

    def stage_all(self) -> str:
        """Stage every change and return the staged diff (no external diff, no textconv)."""
        self.run("add", "-A", "--", ".")
        return self.run("diff", "--cached", "--no-ext-diff", "--no-textconv", "--no-color", "-U0").stdout

    def unstage(self) -> None:
        """Undo `stage_all` (the working copy keeps its changes)."""
        self.run("reset", "-q")

    def commit(self, *, message: str, author_name: str, author_email: str) -> str:
        """Commit what is staged as `author_name <author_email>`; return the new sha."""
        when = {"GIT_AUTHOR_NAME": author_name, "GIT_AUTHOR_EMAIL": author_email,
                "GIT_COMMITTER_NAME": author_name, "GIT_COMMITTER_EMAIL": author_email}
        result = self._commit_with_message(message, when)
        if result.returncode != 0:
            raise GitError(_reason(result.stderr) or "git commit failed")
        return self.head()

    def _commit_with_message(self, message: str, env_extra: dict) -> subprocess.CompletedProcess:
        env = _base_env(self.workspace) | env_extra
        return subprocess.run(
            self._argv(("commit", "-q", "--no-verify", "--no-gpg-sign", "--cleanup=verbatim", "-F", "-")),
            input=message, text=True, capture_output=True, env=env, cwd=self.workspace.work, timeout=self.timeout,
        )

    def diffstat(self, start: str, end: str = "HEAD") -> str:
        """Return `git diff --stat start end` (the summary line last), "" when equal."""
        return self.run("diff", "--stat", "--no-ext-diff", "--no-textconv", "--no-color", start, end).stdout.rstrip()

    def patch(self, sha: str, *, limit: int = 32 * 1024) -> str:
        """Return the patch commit `sha` introduced (no external diff, no textconv), cut to `limit` bytes."""
        text = self.run("show", "--format=", "--no-ext-diff", "--no-textconv", "--no-color", sha).stdout
        raw = text.encode()
        return text if len(raw) <= limit else raw[:limit].decode(errors="ignore") + "\n…[patch cut]"

    def commits_since(self, start: str) -> list[str]:
        """Return the shas from `start` (exclusive) to HEAD, oldest first."""
        out = self.run("rev-list", "--reverse", f"{start}..HEAD").stdout
        return [line for line in out.split() if line]

    def message(self, sha: str) -> str:
        """Return the full message of commit `sha`."""
        return self.run("log", "-1", "--format=%B", sha).stdout

    # -- pushing ---------------------------------------------------------------------------
    def push(self, url: str, branch: str, *, credential: CredentialValue | None = None) -> None:
        """Push HEAD to `refs/heads/<branch>` of `url`; raise `GitError` with git's reason if refused.

        A token credential travels as an `Authorization: Basic` header through `GIT_CONFIG_*`
        environment entries; an SSH key file as the only identity of our ssh command.
        """
        env_extra = {}
        key_file = ""
        if credential is not None and credential.secret:
            token = base64.b64encode(f"x-access-token:{credential.secret}".encode()).decode()
            env_extra = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader", "GIT_CONFIG_VALUE_0": f"Authorization: Basic {token}"}
        elif credential is not None and credential.key_file:
            key_file = credential.key_file
        self.run("push", "--no-verify", "--", url, f"HEAD:refs/heads/{branch}", env_extra=env_extra, key_file=key_file,
                 remote=self.remote_for(url))


def _reason(stderr: str) -> str:
    lines = [line.strip() for line in (stderr or "").splitlines() if line.strip() and not line.startswith("hint:")]
    return "\n".join(lines[-6:])[:2000]


LS_REMOTE_TIMEOUT_SECONDS = 10.0


def remote_has_branch(url: str, branch: str, *, timeout: float = LS_REMOTE_TIMEOUT_SECONDS) -> bool | None:
    """Ask remote `url` whether it has `refs/heads/<branch>` (`git ls-remote`, pinned like every fetch).

    Returns True/False on an answer, None when the remote could not be asked (unreachable, refused
    by the outbound rules, slower than `timeout` seconds): the caller then lets the run find out.
    Runs in a throw-away workspace (HOME, config) removed before returning.
    """
    workspace = workspace_create(None)
    try:
        git = Git(workspace, allow_file=urlsplit(url).scheme == "file", timeout=timeout)
        git.init()
        result = git.run("ls-remote", "--heads", "--", url, f"refs/heads/{branch}", remote=git.remote_for(url), check=False)
        if result.returncode != 0:
            return None
        return any(line.split("\t", 1)[-1].strip() == f"refs/heads/{branch}" for line in result.stdout.splitlines())
    except (GitError, OSError, subprocess.SubprocessError):
        return None
    finally:
        workspace_remove(workspace)
