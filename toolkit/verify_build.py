"""Verify a published build from anywhere: one file, Python's standard library and `git` only.

    python3 agents-verify.py <build URL or session id> --repo <path or URL>

This file is the whole verifier (issue 57 item 2). The platform serves it byte for byte at
`/builds/verify.py` (each build page offers it), `python -m runner verify` runs it, and the
server reads commit trailers with its `parse_links` (through `toolkit.provenance`): one
implementation. It imports nothing of the platform, so it runs in a clone of any repository
with no project on `sys.path`.

It re-derives a build's commit → (session, turn) bindings from git alone and compares them with
the log the server published:

- the published side: a build URL (`https://host/builds/{org}/{project}/{sessionId}/`, or the
  API's `/v1/agents/builds/…`) is read from the public builds API (no credential); a bare
  session id is read from `GET /v1/agents/sessions/{id}/events` with `--server` and `--api-key`
  (or `AGENTS_SERVER` / `AGENTS_API_KEY`). Its commits are the `commit` turns (`commit`,
  `forTurn`), its branch and head the run's closing facts. No redirect is followed.
- the git side: `--repo` is a clone (its `origin` is fetched for the run's branch first, as the
  page's recipe does), a bare repository, or a URL (fetched into a temporary repository). Every
  commit of the branch whose `Agents-Session` trailer names the session is a binding.

Exit 0 when both agree (same commits, same turns, same order, branch at the published head);
1 with one line per mismatch; 2 for a usage error or when either side cannot be read (the
network, an unknown build, a missing branch, no `git`).

Trailers (DESIGN §7; reference §7.3): a commit an agent made during a session carries two lines
in its message (or in a git note under `refs/notes/agents-provenance`):

    Agents-Session: sess_0123…
    Agents-Turn: 7
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote, urlsplit

NOTES_REF = "refs/notes/agents-provenance"
VERIFY_COMMAND = f"git log --format='%x00%H%n%B%n%N' --notes={NOTES_REF}"
SESSION_TRAILER = "Agents-Session"
TURN_TRAILER = "Agents-Turn"
MAX_SESSION_ID = 128

EXIT_OK, EXIT_MISMATCH, EXIT_UNUSABLE = 0, 1, 2
# The event kinds this file reads, spelled here because it imports nothing of the platform (it runs
# from a clone of any repository): toolkit.wire's EventKind.COMMIT and EventKind.LOG, held equal to
# them by tests/runner/test_vocabulary_words.py.
COMMIT_KIND, LOG_KIND = "commit", "log"
LOG_FORMAT = "--format=%x00%H%n%B"
TIMEOUT_SECONDS = 30.0
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # a build's JSON is far smaller; a bigger answer is not a build

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
_TURN = re.compile(r"[0-9]{1,18}")
_TRAILER = re.compile(r"^\s*(Agents-Session|Agents-Turn)\s*:\s*(\S+)\s*$", re.IGNORECASE)
_BUILD_PATH = re.compile(r"^/(?:v1/agents/)?builds/(?P<org>[^/]+)/(?P<project>[^/]+)(?:/(?P<session>[^/]+))?/?$")
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0"}


@dataclass(frozen=True)
class Link:
    """One binding: commit `commit` (hex sha) was made in turn `turn` of session `session`."""

    commit: str
    session: str
    turn: int


def parse_links(output: str) -> list[Link]:
    """Return the bindings in the output of `VERIFY_COMMAND`, in log order.

    The output is split on NUL; each record's first line is the commit sha (7–64 hex), the
    rest its message and notes. A record binds only with both trailers: a session id of at
    most 128 characters and a turn that is a positive integer. When a trailer appears more
    than once, the last occurrence wins (a note written after the commit overrides it).
    Example record: `"\\x00" + sha + "\\nfix\\n\\nAgents-Session: sess_1\\nAgents-Turn: 3\\n"` →
    `Link(sha, "sess_1", 3)`.
    """
    links: list[Link] = []
    for record in output.split("\x00"):
        lines = record.strip("\n").split("\n")
        sha = lines[0].strip().lower() if lines else ""
        if not _SHA.fullmatch(sha):
            continue
        session = turn = None
        for line in lines[1:]:
            match = _TRAILER.match(line)
            if match is None:
                continue
            key, value = match.group(1).lower(), match.group(2)
            if key == SESSION_TRAILER.lower():
                session = value
            else:
                turn = value
        if not session or len(session) > MAX_SESSION_ID or turn is None or not _TURN.fullmatch(turn) or int(turn) <= 0:
            continue
        links.append(Link(commit=sha, session=session, turn=int(turn)))
    return links


class Unusable(Exception):
    """A side of the comparison could not be read; the message says which and why."""


@dataclass
class Published:
    """The published log of one build: its session, branch, head and commits `[(sha, turn)]`, oldest first."""

    session: str
    branch: str = ""
    head: str = ""
    commits: list[tuple[str, int]] = field(default_factory=list)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: the address the user named answers, or the read fails."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: D102  (urllib's hook)
        return None


_OPENER = urllib.request.build_opener(_NoRedirect)


def _get(url: str, *, headers: dict | None = None, timeout: float = TIMEOUT_SECONDS) -> dict:
    """Return the JSON object `url` (http or https) answers with 200; raise `Unusable` otherwise."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise Unusable(f"cannot read {url}: only http and https addresses are read")
    request = urllib.request.Request(url, headers={"Accept": "application/json", **(headers or {})})
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            status, body = response.status, response.read(MAX_ANSWER_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise Unusable(f"{url} answered {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise Unusable(f"cannot read {url}: {getattr(exc, 'reason', exc)}") from None
    if status != 200:
        raise Unusable(f"{url} answered {status}")
    try:
        value = json.loads(body)
    except ValueError:
        raise Unusable(f"{url} did not answer JSON") from None
    if not isinstance(value, dict):
        raise Unusable(f"{url} did not answer a JSON object")
    return value


def _from_build(build: dict) -> Published:
    published = Published(session=str(build.get("session") or ""), branch=str(build.get("branch") or ""),
                          head=str(build.get("head") or ""))
    for turn in build.get("turns") or []:
        if not isinstance(turn, dict) or not isinstance(turn.get("commit"), str) or not turn["commit"]:
            continue
        owner = turn.get("forTurn") if turn.get("kind") == COMMIT_KIND else turn.get("turn")
        if isinstance(owner, int):
            published.commits.append((turn["commit"].lower(), owner))
    return published


def _from_events(events: list[dict], session_id: str) -> Published:
    published = Published(session=session_id)
    for event in events:
        payload = event.get("payload") if isinstance(event.get("payload"), dict) else {}
        if event.get("kind") == COMMIT_KIND and isinstance(payload.get("commit"), str) and isinstance(payload.get("turn"), int):
            published.commits.append((payload["commit"].lower(), payload["turn"]))
        elif event.get("kind") == LOG_KIND and isinstance(payload.get("branch"), str) and "commitSha" in payload:
            published.branch, published.head = payload["branch"], str(payload.get("commitSha") or "")
    return published


def read_published(target: str, *, server: str = "", api_key: str = "", timeout: float = TIMEOUT_SECONDS) -> Published:
    """Return the published log of `target` (a build URL, or a session id read with `server` and `api_key`).

    Raises `Unusable` when it cannot be read.
    """
    parts = urlsplit(target)
    if parts.scheme in ("http", "https"):
        match = _BUILD_PATH.match(parts.path)
        if match is None:
            raise Unusable(f"{target} is not a build address (…/builds/{{org}}/{{project}}/{{sessionId}}/)")
        path = "/".join(quote(v, safe="") for v in (match["org"], match["project"], match["session"]) if v)
        return _from_build(_get(f"{parts.scheme}://{parts.netloc}/v1/agents/builds/{path}", timeout=timeout))
    if not server or not api_key:
        raise Unusable("a session id is read through the API: give --server and --api-key (or AGENTS_SERVER / AGENTS_API_KEY), or a build URL")
    events, cursor = [], ""
    base = f"{server.rstrip('/')}/v1/agents/sessions/{quote(target, safe='')}/events?limit=500"
    for _ in range(1000):
        page = _get(base + (f"&cursor={quote(cursor, safe='')}" if cursor else ""), headers={"Authorization": f"Bearer {api_key}"}, timeout=timeout)
        events += page.get("events") or []
        cursor = page.get("nextCursor") or ""
        if not cursor:
            break
    return _from_events(events, target)


def _git(*args: str, cwd: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **_GIT_ENV}, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        raise Unusable(f"git {args[0]} could not run: {exc}") from None
    if check and result.returncode != 0:
        raise Unusable(f"git {args[0]} failed: {result.stderr.strip().splitlines()[-1] if result.stderr.strip() else result.returncode}")
    return result


def _branch_log(repo: str, branch: str, scratch: str) -> tuple[str, str]:
    """Return `(git log output of the branch, its tip sha)` from clone/bare repo/URL `repo`."""
    local = Path(repo).expanduser()
    if local.is_dir() and _git("-C", str(local), "rev-parse", "--git-dir", check=False).returncode == 0:
        git_dir = str(local)
        ref = f"refs/heads/{branch}" if branch else ""
        if branch and _git("-C", git_dir, "remote", "get-url", "origin", check=False).returncode == 0:
            # What the page's recipe does in a clone: bring the run's branch from the remote, as it is now.
            _git("-C", git_dir, "fetch", "--quiet", "--no-tags", "origin", f"+refs/heads/{branch}:refs/remotes/origin/{branch}")
            ref = f"refs/remotes/origin/{branch}"
    else:
        git_dir = scratch
        _git("init", "--quiet", "--bare", scratch)
        if not branch:
            raise Unusable("the published log names no branch; give --repo a local clone holding its commits")
        _git("-C", git_dir, "fetch", "--quiet", "--no-tags", "--", repo, f"+refs/heads/{branch}:refs/heads/{branch}")
        ref = f"refs/heads/{branch}"
    if ref and _git("-C", git_dir, "rev-parse", "--verify", "--quiet", ref, check=False).returncode != 0:
        raise Unusable(f"{repo} has no branch {branch}")
    log = _git("-C", git_dir, "log", "--reverse", LOG_FORMAT, *([ref] if ref else ["--all"])).stdout
    tip = _git("-C", git_dir, "rev-parse", ref).stdout.strip() if ref else ""
    return log, tip


def compare(published: Published, log: str, tip: str) -> list[str]:
    """Return one line per disagreement between `published` and the git `log` (oldest first) of its branch at `tip`."""
    derived = [(link.commit, link.turn) for link in parse_links(log) if link.session == published.session]
    where = published.branch or "the repository"
    in_git, in_log = dict(derived), dict(published.commits)
    lines = []
    for sha, turn in published.commits:
        if sha not in in_git:
            lines.append(f"missing: commit {sha} (turn {turn}) is published but not on {where} with session {published.session}")
        elif in_git[sha] != turn:
            lines.append(f"turn: commit {sha} says turn {in_git[sha]} in git, the published log says turn {turn}")
    for sha, turn in derived:
        if sha not in in_log:
            lines.append(f"unpublished: commit {sha} on {where} claims turn {turn} of {published.session}; the published log has no such commit")
    common_git = [sha for sha, _ in derived if sha in in_log]
    common_log = [sha for sha, _ in published.commits if sha in in_git]
    if common_git != common_log:
        lines.append(f"order: the commits on {where} are in another order than the published log")
    if published.head and tip and tip != published.head.lower():
        lines.append(f"head: {where} is at {tip}, the published log says {published.head}")
    return lines


def verify(target: str, repo: str, *, server: str = "", api_key: str = "", out=None) -> int:
    """Compare build `target` with repository `repo`; print the verdict to `out`; return the exit status (0, 1, 2)."""
    out = out or sys.stdout
    scratch = tempfile.mkdtemp(prefix="agents-verify-")
    try:
        published = read_published(target, server=server, api_key=api_key)
        if not published.session:
            raise Unusable("the published log names no session")
        log, tip = _branch_log(repo, published.branch, os.path.join(scratch, "git"))
        lines = compare(published, log, tip)
    except Unusable as exc:
        print(f"cannot verify: {exc}", file=out)
        return EXIT_UNUSABLE
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for line in lines:
        print(line, file=out)
    if lines:
        print(f"{len(lines)} mismatch(es) between {published.branch or repo} and the published log of {published.session}", file=out)
        return EXIT_MISMATCH
    print(f"ok: {len(published.commits)} commit(s) of {published.session} on {published.branch or repo} match the published log", file=out)
    return EXIT_OK


def main(argv: list[str] | None = None, *, prog: str | None = None) -> int:
    """Parse `verify` arguments and run it; return the exit status (a usage error exits 2, argparse's way)."""
    parser = argparse.ArgumentParser(prog=prog or os.path.basename(sys.argv[0] or "agents-verify.py"),
                                     description="Re-derive a build's commit bindings from git and compare them with the published log.")
    parser.add_argument("target", help="a build URL (…/builds/{org}/{project}/{sessionId}/) or a session id")
    parser.add_argument("--repo", required=True, help="a clone of the repository, a bare repository, or its URL")
    parser.add_argument("--server", default=os.environ.get("AGENTS_SERVER", ""), help="the server (for a session id)")
    parser.add_argument("--api-key", default=os.environ.get("AGENTS_API_KEY", ""), help="an API key of the org (for a session id)")
    args = parser.parse_args(argv)
    return verify(args.target, args.repo, server=args.server, api_key=args.api_key)


if __name__ == "__main__":
    sys.exit(main())
