"""A routed coding run on this machine: the server's engine, run locally (issue 14 item 5).

In: a claim whose `kind` is `coding`: `{runId, sessionId, repo, project, base, branch, prompt,
cloneUrl, timeoutSeconds, tool, limits}` — no credential. The machine clones `cloneUrl` with its OWN
access (its SSH keys, agent and credential helpers: the server sends none), into a fresh
directory whose git database sits outside the working copy; checks out `base` as `branch`;
runs the same tools the server offers (`toolkit.coding`); commits after every turn that
changed files with the trailers `Agents-Session` / `Agents-Turn` (the seq of the turn's last
tool-call event) within the claim's `limits` (`toolkit.commits`, as the server does); pushes
`branch`; and returns the report `{status, output|error, model, tokens, toolCalls, durationMs,
changed, pushed, branch, commitSha, diffstat, commits, summary}`. A `base` the remote lacks ends
the run at once (`base_not_found: …`).

`run` executes in bubblewrap when the machine has it; without it, `run` is refused unless the
daemon was started with `--allow-unsandboxed-commands` (the target's spec then says
`"sandbox": "none"`). The platform's git runs with hooks, fsmonitor, external diff and textconv
off. Steering (stop, pause, message) and the daemon's SIGTERM apply between turns, and a stop
read while the model call or a command runs cancels it at once (the command's tree is killed,
nothing is pushed unless the stop said `{"push": true}`); when the daemon cuts a run short (its
stop grace passed), a running command's whole process tree is killed too. What a killed command
had printed goes in the report as `stoppedCommand` (no tool result, no event of its own): the
server records it, masked, in the run's end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from runner.execute import OK, Execution, RoutedRun, RunEnded, RunStopped
from toolkit import commits
from toolkit.coding import ToolBox, tool_definitions
from toolkit.codingloop import Answered, CodingTool, MakeCommit, MeasureTree, PlanCommit, RecordCall, Stage, Tell, coding_turns
from toolkit.events import clip, coding_call_payload, commit_payload
from toolkit.sandbox import CommandCancelled, Limits, SandboxBackend, Unavailable
from toolkit.toolloop import awaited_through
from toolkit.wire import ChatRole, EventKind, RunKind

logger = logging.getLogger(__name__)

CODING_KIND = RunKind.CODING
BASE_NOT_FOUND = "base_not_found"  # the server's error code for a start branch the remote lacks
MAX_TURNS = 40
SYSTEM_PROMPT = (
    "You are a coding agent working in a git repository checked out at the working directory. "
    "Use the tools to inspect and change files and to run commands. The platform commits your changes "
    "after each turn with your one-line summary as the subject. When the task is done, call finish with a summary."
)
_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "diff.external=", "-c", "core.pager=cat",
         "-c", "core.editor=true", "-c", "commit.gpgSign=false", "-c", "submodule.recurse=false", "-c", "gc.auto=0")


class GitFailed(Exception):
    """A git command failed; the message is git's reason."""


@dataclass
class CodingClaim:
    """The routed coding run as claimed."""

    run_id: str
    session_id: str
    repo: str
    base: str
    branch: str
    prompt: str
    clone_url: str
    timeout_seconds: float

    @classmethod
    def parse(cls, body: dict) -> CodingClaim:
        return cls(run_id=str(body.get("runId") or ""), session_id=str(body.get("sessionId") or ""), repo=str(body.get("repo") or ""),
                   base=str(body.get("base") or "main"), branch=str(body.get("branch") or ""), prompt=str(body.get("prompt") or ""),
                   clone_url=str(body.get("cloneUrl") or ""), timeout_seconds=float(body.get("timeoutSeconds") or 600))


class LocalGit:
    """git over a git database outside the working copy, with the machine user's own access."""

    def __init__(self, root: Path) -> None:
        self.git_dir, self.work = root / "git", root / "work"
        self.work.mkdir(parents=True)

    def run(self, *args: str, input: str | None = None, env: dict | None = None) -> str:
        argv = ["git", "--git-dir", str(self.git_dir), "--work-tree", str(self.work), *_SAFE, *args]
        result = subprocess.run(argv, cwd=self.work, input=input, capture_output=True, text=True, timeout=300,
                                env={**os.environ, "GIT_TERMINAL_PROMPT": "0", **(env or {})})
        if result.returncode != 0:
            lines = [line for line in result.stderr.splitlines() if line.strip() and not line.startswith("hint:")]
            raise GitFailed("\n".join(lines[-6:]) or f"git {args[0]} failed")
        return result.stdout

    def clone(self, url: str) -> None:
        subprocess.run(["git", "init", "-q", "--bare", "--template=", str(self.git_dir)], check=True, capture_output=True)
        self.run("config", "core.bare", "false")
        self.run("fetch", "--no-tags", "--quiet", "--", url, "+refs/heads/*:refs/remotes/origin/*")

    def head(self) -> str:
        return self.run("rev-parse", "HEAD").strip()


NO_SANDBOX = "this machine has no bubblewrap sandbox and its owner did not allow unsandboxed commands"


class CodingExecution(Execution):
    """One routed coding run (`await CodingExecution(...).execute()` → the report body)."""

    def __init__(self, body: dict, *, server, inference, stopping: asyncio.Event, sandbox: SandboxBackend | None,
                 model_override: str = "", work_dir: str | None = None) -> None:
        claim = CodingClaim.parse(body)
        run = RoutedRun(run_id=claim.run_id, session_id=claim.session_id, agent_name="coding-dev", model=model_override or "",
                        instructions="", tools=[], input=claim.prompt, timeout_seconds=claim.timeout_seconds)
        super().__init__(run, server=server, inference=inference, tools={}, stopping=stopping, model_override=model_override)
        self.claim = claim
        self.sandbox = sandbox
        self.work_dir = work_dir
        self.git: LocalGit | None = None
        self.start_sha = ""
        self.head = ""
        self.pushed = False
        self.commits: list[dict] = []
        self.bounds = commits.Bounds.from_wire(body.get("limits"))
        self.toolbox: ToolBox | None = None

    async def _git(self, *args: str, **kwargs) -> str:
        return await asyncio.to_thread(self.git.run, *args, **kwargs)

    async def _stage(self, plan: commits.TurnPlan) -> None:
        """Stage the turn's planned files (in chunks the command line holds)."""
        for chunk in commits.chunks(plan.stage):
            await self._git(*commits.stage_args(chunk))

    async def _make_commit(self, op: MakeCommit) -> None:
        """Commit the staged changes as `op.subject` with the trailers (turn: the seq of the turn's last
        tool-call event, else its number) and post the `commit` event at once."""
        turn = op.seq or op.turn_no
        message = f"{op.subject}\n\nAgents-Session: {self.claim.session_id}\nAgents-Turn: {turn}\n"
        author = {"GIT_AUTHOR_NAME": "coding-dev", "GIT_AUTHOR_EMAIL": "coding-dev@agents.invalid",
                  "GIT_COMMITTER_NAME": "coding-dev", "GIT_COMMITTER_EMAIL": "coding-dev@agents.invalid"}
        parent = await asyncio.to_thread(self.git.head)
        await self._git("commit", "-q", "--no-verify", "--cleanup=verbatim", "-F", "-", input=message, env=author)
        sha = await asyncio.to_thread(self.git.head)
        stat = (await self._git("diff", "--stat", "--no-ext-diff", "--no-textconv", parent, sha)).rstrip()
        patch = await self._git("show", "--format=", "--no-ext-diff", "--no-textconv", "--no-color", sha)
        commit = {"sha": sha, "subject": op.subject, "turn": turn, "diffstat": stat}
        self.commits.append(commit)
        await self.event(EventKind.COMMIT, commit_payload(subject=op.subject, sha=sha, diffstat=stat, turn=turn, branch=self.claim.branch, patch=patch,
                                                  run_id=self.claim.run_id))
        await self.flush()  # each commit reaches the session as it is made

    async def _loop(self) -> None:
        root = Path(tempfile.mkdtemp(prefix="agents-coding-", dir=self.work_dir))
        try:
            self.git = LocalGit(root)
            try:
                await asyncio.to_thread(self.git.clone, self.claim.clone_url)
            except GitFailed as exc:
                raise RunEnded(f"clone failed: {exc}") from exc
            try:
                await self._git("rev-parse", "--verify", "--quiet", f"refs/remotes/origin/{self.claim.base}^{{commit}}")
            except GitFailed:
                raise RunEnded(f"{BASE_NOT_FOUND}: branch {self.claim.base!r} does not exist in {self.claim.repo}") from None
            try:
                await self._git("checkout", "-q", "-f", "-B", self.claim.branch, f"refs/remotes/origin/{self.claim.base}")
            except GitFailed as exc:
                raise RunEnded(f"clone failed: {exc}") from exc
            self.start_sha = await asyncio.to_thread(self.git.head)
            await self.event(EventKind.LOG, {"text": f"cloned {self.claim.repo} at {self.claim.base} ({self.start_sha[:12]}); working on {self.claim.branch}",
                                     "branch": self.claim.branch, "base": self.claim.base, "baseCommit": self.start_sha})
            try:
                await self._turns()
            except RunStopped as stopped:
                # A stop that said {"push": true} pushes the commits made before it; any other end pushes nothing.
                if stopped.command.get("push") is True:
                    try:
                        await self._push_branch()
                    except RunEnded as failed:
                        raise RunStopped(f"{stopped}; the push it asked for failed: {failed}", stopped.command) from None
                raise
            await self._push_branch()
            self.outcome.status = OK
        finally:
            if self.git is not None and self.start_sha and not self.head:
                try:
                    self.head = self.git.head()
                except GitFailed:
                    pass
            self.diffstat = ""
            if self.git is not None and self.start_sha and self.head and self.head != self.start_sha:
                try:
                    self.diffstat = self.git.run("diff", "--stat", "--no-ext-diff", self.start_sha, self.head).rstrip()
                except GitFailed:
                    pass
            shutil.rmtree(root, ignore_errors=True)

    async def _turns(self) -> None:
        """Drive the shared coding turns (`toolkit.codingloop.coding_turns`) with this machine's effects (`_perform`)."""
        self.toolbox = ToolBox(root=self.git.work, sandbox=self.sandbox or Unavailable(NO_SANDBOX), limits=Limits(timeout_seconds=120),
                               seconds_left=lambda: max(self.deadline - time.monotonic(), 0.1))
        messages = [{"role": ChatRole.SYSTEM, "content": SYSTEM_PROMPT}, {"role": ChatRole.USER, "content": self.claim.prompt}]
        await self.event(EventKind.MESSAGE, {"role": ChatRole.USER, "text": clip(self.claim.prompt)})
        end = await awaited_through(coding_turns(messages=messages, definitions=tool_definitions(), turns=MAX_TURNS, bounds=self.bounds),
                                    self._perform)
        if not isinstance(end, Answered):  # out of turns, or the tree stayed over its cap
            raise RunEnded(end.reason)
        self.outcome.output = end.text

    async def _perform(self, op):
        """Perform one operation of the coding turns on this machine (see `toolkit.codingloop`); steering,
        the model call, its text and the stop check are the tool loop's (`Execution._perform`)."""
        if isinstance(op, CodingTool):
            await self.flush()  # the turn's message lands before a stop can kill its command (issue 25: nothing after the stop)
            return await self._watched(self._acall(self.toolbox, op.name, op.raw))
        if isinstance(op, RecordCall):
            self.outcome.tool_calls += 1
            await self.flush()  # the turn's queued events (its message) land before its tool call, as on the server
            stored = await self.server.append_event(session_id=self.claim.session_id, kind=EventKind.TOOL_CALL, payload=coding_call_payload(
                name=op.name, raw_arguments=op.raw, result=op.result, failed=op.failed, turn_no=op.turn_no, run_id=self.claim.run_id))
            return stored["seq"] if stored and isinstance(stored.get("seq"), int) else None
        if isinstance(op, MeasureTree):
            return await asyncio.to_thread(commits.tree_bytes, self.git.work)
        if isinstance(op, PlanCommit):
            return commits.plan_turn(await self._git(*commits.STATUS_ARGS), self.git.work, bounds=self.bounds, pushed_bytes=op.pushed_bytes)
        if isinstance(op, Stage):
            return await self._stage(op.plan)
        if isinstance(op, MakeCommit):
            return await self._make_commit(op)
        if isinstance(op, Tell):
            await self.event(EventKind.LOG, {"text": op.text, **op.extra})
            return None
        return await super()._perform(op)

    async def _push_branch(self) -> None:
        """Push the run's branch when it has commits (sets `pushed`); raise `RunEnded` when refused."""
        self.head = await asyncio.to_thread(self.git.head)
        if self.head != self.start_sha:
            try:
                await self._git("push", "--no-verify", "--", self.claim.clone_url, f"HEAD:refs/heads/{self.claim.branch}")
            except GitFailed as exc:
                raise RunEnded(f"push of {self.claim.branch} was rejected: {exc}") from exc
            self.pushed = True
            await self.event(EventKind.LOG, {"text": f"pushed {self.claim.branch} ({self.head[:12]})", "branch": self.claim.branch, "head": self.head})

    async def _acall(self, toolbox: ToolBox, name: str, raw: str) -> tuple[str, bool]:
        """Run one coding tool; a killed command's output so far is recorded with the stop."""
        try:
            return await toolbox.acall(name, raw)
        except CommandCancelled as stopped:  # the tree is gone; keep what it printed for the run's end
            self.record_stop(name, stopped, raw)
            raise

    async def execute(self) -> dict:
        """Run clone → turns → push; return the report (never raises)."""
        report = await super().execute()
        changed = bool(self.start_sha and self.head and self.head != self.start_sha)
        report.update({"changed": changed, "branch": self.claim.branch, "commitSha": self.head, "diffstat": getattr(self, "diffstat", ""),
                       "pushed": self.pushed, "commits": self.commits, "summary": self.outcome.output if report["status"] == OK else ""})
        if report["status"] == OK:
            lines = [self.outcome.output.strip() or "(no summary)", ""]
            lines += [f"branch: {self.claim.branch}", f"commit: {self.head}", "", report["diffstat"]] if changed else ["no changes; nothing pushed"]
            report["output"] = "\n".join(lines).strip()
        return report
