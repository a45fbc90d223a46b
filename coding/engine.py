"""The coding engine: one autonomous run from prompt to a pushed branch (issue 14 item 3).

    clone (fetch every branch into a fresh database outside the working copy)
    → check out the start (`base`, else the branch of the `after` run, else the default branch)
    → create the run's own branch `agents/<short session id>`
    → turns: one completion (retries and failover as every run, `agents.execution.completion`),
      then the coding tools it asks for; every call is a `tool-call` event of the session;
      after a turn that changed files the platform commits them within the run's bounds
      (`toolkit.commits`: no by-products, no links out of the working copy, per-file and
      per-run size limits told to the model; author: the agent; subject: the model's words
      for the turn, else a summary of its file changes; trailers `Agents-Session` and
      `Agents-Turn` = the seq of the turn's last tool-call event) and records a `commit`
      event (sha, subject, diffstat, diff)
    → `finish` (or a plain answer) ends the loop → push the branch (only when commits exist).

Between turns the session's steering commands apply exactly as for every run (`RunLoop.steer`):
`pause` holds, `message` adds a user turn, `stop` ends the run `error` "stopped by …"
(nothing pushed; commits made so far are reported). A stop also interrupts the turn in flight
(issue 25): the completion's request is cancelled, a running `run` command's whole process tree
is killed (no tool result is recorded; what it printed is kept, masked, in the run's end as
`stoppedCommand`), and the run ends `finishReason` `stopped`. The commits made before the stop
are pushed only when the stop said `{"push": true}`. A `pause` lets the command finish (its
result is recorded) and holds before the next turn. Before each commit the staged diff goes
through the project's secret scanner; a credential is unstaged, never committed, and the model
is told why. The working copy is removed whatever happens.
"""

from __future__ import annotations

import logging
import math
import time
from contextlib import ExitStack
from dataclasses import dataclass, field

from django.conf import settings

from runs import tracing
from agents.execution.completion import CompletionFailed, CompletionStopped, complete, models_for
from agents.execution.loop import Outcome, RunEnded, RunLoop, RunStopped, masked, valid_text, watch_stop
from agents.models import Agent
from runs.models import Run
from runs.run_session import RunSession, clip
from agents_site.vocabulary import ChatRole, ErrorCode, EventKind, FinishReason, RunStatus
from coding import git as gitops
from coding.models import CodingRun, Repo
from coding.remotes import RepoScheme, check_reachable, credential_value
from coding.sandbox import default_limits
from toolkit import commits
from toolkit.coding import ToolBox, tool_definitions
from toolkit.codingloop import CodingTool, MakeCommit, MeasureTree, PlanCommit, RecordCall, Stage, Tell, coding_turns
from toolkit.events import coding_call_payload, commit_payload, stopped_command
from toolkit.sandbox import CommandCancelled, SandboxBackend
from toolkit.stopping import StopSignal, run_stoppable
from toolkit.toolloop import Answered, AskModel, CheckStop, Reply, Said, Steer, run_through
from sessions.scanner import scan_text
from sessions.errors import SecretInTranscript
from sessions.services import session_append_event
from agents_site.errors import ApiError

logger = logging.getLogger(__name__)

#: `gen_ai.tool.name` of the agent.tool spans of a turn's commit and of the branch push (issue 32 item 6).
SPAN_COMMIT = "git.commit"
SPAN_PUSH = "git.push"
SYSTEM_PROMPT = (
    "You are a coding agent working in a git repository checked out at the working directory. "
    "Use the tools to inspect and change files and to run commands (no network; only the repository is writable). "
    "The platform commits your changes after each turn with your one-line summary as the subject, so start each "
    "reply that changes files with a short summary line. When the task is done, call finish with a summary."
)


@dataclass
class Commit:
    """One commit the run made: sha, subject, the seq of its turn's tool-call event, diffstat."""

    sha: str
    subject: str
    turn: int
    diffstat: str
    patch: str = ""

    def as_dict(self, *, with_patch: bool = False) -> dict:
        """Return `{sha, subject, turn, diffstat}` (plus `patch` when asked: the stored record)."""
        view = {"sha": self.sha, "subject": self.subject, "turn": self.turn, "diffstat": self.diffstat}
        return {**view, "patch": self.patch} if with_patch else view


@dataclass
class CodingOutcome(Outcome):
    """What a coding run produced, beyond a run's outcome: branch, head, diffstat, commits, push."""

    changed: bool = False
    pushed: bool = False
    branch: str = ""
    head_sha: str = ""
    diffstat: str = ""
    summary: str = ""
    commits: list[Commit] = field(default_factory=list)
    stopped_command: dict | None = None  # a command killed by a stop: {name, command, output (masked, clipped)}

    def report(self) -> dict:
        """Return the wire summary `{text, summary, changed, pushed, branch, commitSha, diffstat, commits}`
        (`summary`: the model's `finish` text; `text`: the run's output, or its error), plus
        `stoppedCommand` when a stop killed a command."""
        report = {
            "text": self.output or self.error, "summary": self.summary,
            "changed": self.changed, "pushed": self.pushed, "branch": self.branch, "commitSha": self.head_sha,
            "diffstat": self.diffstat, "commits": [c.as_dict() for c in self.commits],
        }
        if self.stopped_command is not None:
            report["stoppedCommand"] = self.stopped_command
        return report


def coding_bounds() -> commits.Bounds:
    """Return the operator's commit bounds (`AGENTS_CODING_MAX_FILE_MB`, `…_PUSH_MB`, `…_REPO_MB`) as `toolkit.commits.Bounds`."""
    return commits.Bounds.from_mb(file_mb=settings.AGENTS_CODING_MAX_FILE_MB, push_mb=settings.AGENTS_CODING_MAX_PUSH_MB,
                                  tree_mb=settings.AGENTS_CODING_MAX_REPO_MB)


def short_session_id(session_id: str) -> str:
    """Return the 12 hex characters naming a run's branch: `sess_0123456789ab…` → `0123456789ab`."""
    return session_id.split("_", 1)[-1][:12]


def branch_for(session_id: str) -> str:
    """Return the run's own branch, `agents/<short session id>`."""
    return f"agents/{short_session_id(session_id)}"


def _diff_findings(diff: str) -> list:
    """Return the scanner's findings over the added lines of a staged diff (file names kept)."""
    added = []
    for line in diff.splitlines():
        if line.startswith("+++ "):
            added.append(line[4:])
        elif line.startswith("+"):
            added.append(line[1:])
    return scan_text("\n".join(added)) if added else []


class CodingLoop(RunLoop):
    """One coding run inside an org context; `execute()` returns a `CodingOutcome`, never raises.

    Reuses `RunLoop`'s steering (`steer`), retry reporting and token accounting; the tools,
    the commits and the push are its own.
    """

    def __init__(self, *, run: Run, coding: CodingRun, repo: Repo, agent: Agent | None, session: RunSession,
                 org_slug: str, sandbox: SandboxBackend, deadline: float | None = None) -> None:
        self.agent = agent
        self.text = run.input
        self.run = run
        self.coding = coding
        self.repo = repo
        self.session = session
        self.org_slug = org_slug
        self.sandbox = sandbox
        self.deadline = deadline if deadline is not None else math.inf
        self.outcome = CodingOutcome(model=(agent.model if agent and agent.model else settings.AGENTS_DEFAULT_MODEL), branch=coding.branch)
        self._held = False
        self.workspace: gitops.Workspace | None = None
        self.git: gitops.Git | None = None
        self.start_sha = ""
        self.author = run.agent_name or "agent"
        self.bounds = coding_bounds()
        self.stop = StopSignal()
        watch_stop(self.session, self.stop)

    # -- session bookkeeping ---------------------------------------------------------------
    def _append(self, kind: EventKind, payload: dict) -> int | None:
        """Append one event; return its seq (None when it could not be recorded).

        A payload the transcript scanner refuses (a credential in a tool's arguments or
        result) is recorded with those fields withheld, so the turn still has its event.
        """
        if not self.session.session_id:
            return None

        try:
            return session_append_event(session_id=self.session.session_id, kind=str(kind), payload=payload, actor=self.session.actor).seq
        except SecretInTranscript:
            withheld = {k: v for k, v in payload.items() if k not in ("arguments", "result", "text")}
            withheld["withheld"] = "arguments and result held a credential; not recorded"
            try:
                return session_append_event(session_id=self.session.session_id, kind=str(kind), payload=withheld, actor=self.session.actor).seq
            except Exception:
                logger.warning("coding run %s: %s event not recorded", self.run.id, kind, exc_info=True)
        except Exception:
            logger.warning("coding run %s: %s event not recorded", self.run.id, kind, exc_info=True)
        return None

    def _log(self, text: str, **extra) -> None:
        self._append(EventKind.LOG, {"text": text, "runId": self.run.id, **extra})

    # -- preparing the working copy -----------------------------------------------------------
    def _max_bytes(self) -> int:
        return max(settings.AGENTS_CODING_MAX_REPO_MB, 1) * 1024 * 1024

    def _prepare(self) -> None:
        remote = check_reachable(self.repo.clone_url)
        self.workspace = gitops.workspace_create(settings.AGENTS_CODING_WORK_DIR or None)
        self.git = gitops.Git(self.workspace, allow_file=remote.scheme == RepoScheme.FILE)
        try:
            self.git.clone(self.repo.clone_url, max_bytes=self._max_bytes())
        except gitops.GitError as exc:
            raise RunEnded(f"clone failed: {exc.reason}") from exc
        start = self.coding.start_ref
        if not self.git.has_ref(f"refs/remotes/origin/{start}"):
            raise RunEnded(f"{ErrorCode.BASE_NOT_FOUND}: branch {start!r} does not exist in {self.repo.full_name}")
        try:
            self.start_sha = self.git.checkout_new_branch(self.coding.branch, f"refs/remotes/origin/{start}")
        except gitops.GitError as exc:
            raise RunEnded(f"checkout failed: {exc.reason}") from exc
        if gitops.tree_bytes(self.workspace.root) > self._max_bytes() * 2:
            raise RunEnded(f"the working copy is larger than {settings.AGENTS_CODING_MAX_REPO_MB} MiB")
        self._log(f"cloned {self.repo.full_name} at {start} ({self.start_sha[:12]}); working on {self.coding.branch}",
                  branch=self.coding.branch, base=start, baseCommit=self.start_sha)

    # -- commits ---------------------------------------------------------------------------
    def _stage(self, plan: commits.TurnPlan) -> str | None:
        """Stage the turn's planned files; return None, or why they may not be committed (a credential the
        scanner found in the staged diff: they are unstaged and the reason logged with the findings)."""
        findings = _diff_findings(self.git.stage(plan.stage))
        if not findings:
            return None
        self.git.unstage()
        first = findings[0]
        reason = (f"refused to commit: the changes hold {len(findings)} credential(s) "
                  f"({first.rule}, {first.preview}). Remove them (reference secrets by name, e.g. an environment variable); "
                  "nothing was committed.")
        self._log(reason, findings=[f.as_dict() for f in findings])
        return reason

    def _make_commit(self, op: MakeCommit) -> None:
        """Commit the staged changes as `op.subject` with the trailers (turn: the seq of the turn's last
        tool-call event, else a log event's) and record the `commit` event."""
        turn = op.seq
        if turn is None:
            turn = self._append(EventKind.LOG, {"text": "commit of changes made outside a recorded turn", "runId": self.run.id}) or 1
        message = f"{op.subject}\n\nAgents-Session: {self.session.session_id}\nAgents-Turn: {turn}\n"
        parent = self.git.head()
        sha = self.git.commit(message=message, author_name=self.author, author_email=f"{self.author}@agents.invalid")
        stat = self.git.diffstat(parent, sha)
        commit = Commit(sha=sha, subject=op.subject, turn=turn, diffstat=stat, patch=self.git.patch(sha))
        self.outcome.commits.append(commit)
        self._append(EventKind.COMMIT, commit_payload(subject=op.subject, sha=sha, diffstat=stat, turn=turn, branch=self.coding.branch,
                                                      patch=commit.patch, run_id=self.run.id))

    # -- the loop -------------------------------------------------------------------------------
    def _messages(self) -> list[dict]:
        system = SYSTEM_PROMPT
        if self.agent and (self.agent.instructions or "").strip():
            system += "\n\n" + self.agent.instructions.strip()
        return [{"role": ChatRole.SYSTEM, "content": system}, {"role": ChatRole.USER, "content": self.text}]

    def _loop(self) -> None:
        """Prepare the working copy, then drive the shared coding turns (`toolkit.codingloop.coding_turns`)
        with this server's effects (`_coding_op`); each turn runs in its own step span."""
        self._prepare()
        self._toolbox = ToolBox(root=self.workspace.work, sandbox=self.sandbox, limits=default_limits(),
                                seconds_left=lambda: max(self.deadline - time.monotonic(), 0.1) if self.deadline != math.inf else 3600.0)
        self._models = models_for(self.outcome.model)
        messages = self._messages()
        self._append(EventKind.MESSAGE, {"role": ChatRole.USER, "text": clip(self.text), "runId": self.run.id})
        with ExitStack() as self._turn_span:
            end = run_through(coding_turns(messages=messages, definitions=tool_definitions(), turns=max(settings.AGENTS_CODING_MAX_TURNS, 1),
                                           bounds=self.bounds), self._coding_op)
        if not isinstance(end, Answered):  # out of turns, or the tree stayed over its cap
            raise RunEnded(end.reason)
        self.outcome.summary = end.text

    def _coding_op(self, op):
        """Perform one operation of the coding turns on the server (see `toolkit.codingloop`); return its result."""
        if isinstance(op, Steer):  # a turn begins: its step span, then steering and the deadline
            self._turn_span.close()
            self._turn_span.enter_context(tracing.tracer().start_as_current_span(
                tracing.SPAN_STEP, attributes={tracing.ATTR_ROUND: op.round_no, tracing.ATTR_RUN_ID: self.run.id}))
            self.steer(op.messages)
            if time.monotonic() >= self.deadline:
                raise RunEnded("the run ran out of time")
            return None
        if isinstance(op, AskModel):
            return self._ask_model(op)
        if isinstance(op, Said):
            self._append(EventKind.MESSAGE, {"role": ChatRole.ASSISTANT, "text": clip(op.text), "model": op.model, "runId": self.run.id})
            return None
        if isinstance(op, CheckStop):
            return self.check_stop()
        if isinstance(op, CodingTool):
            with tracing.tracer().start_as_current_span(tracing.SPAN_TOOL, attributes={tracing.ATTR_TOOL_NAME: op.name}) as tool_span:
                result, failed = self._call_tool(self._toolbox, op.name, op.raw, op.arguments)  # the span's duration is the sandbox command's
                tool_span.set_attribute(tracing.ATTR_TOOL_FAILED, bool(failed))
            return result, failed
        if isinstance(op, RecordCall):
            self.outcome.tool_calls += 1
            return self._append(EventKind.TOOL_CALL, coding_call_payload(name=op.name, raw_arguments=op.raw, result=op.result, failed=op.failed,
                                                                         turn_no=op.turn_no, run_id=self.run.id))
        if isinstance(op, MeasureTree):  # a turn's commit begins: its span lasts until the next turn
            self._turn_span.enter_context(tracing.tracer().start_as_current_span(tracing.SPAN_TOOL, attributes={tracing.ATTR_TOOL_NAME: SPAN_COMMIT}))
            return commits.tree_bytes(self.workspace.work)
        if isinstance(op, PlanCommit):
            return commits.plan_turn(self.git.status(), self.workspace.work, bounds=self.bounds, pushed_bytes=op.pushed_bytes)
        if isinstance(op, Stage):
            return self._stage(op.plan)
        if isinstance(op, MakeCommit):
            return self._make_commit(op)
        if isinstance(op, Tell):
            self._log(op.text, **op.extra)
            return None
        raise TypeError(f"the coding turns asked for {op!r}")

    def _ask_model(self, op: AskModel) -> Reply:
        """Ask the model for turn `op.round_no` (retries and failover as every run); return its `Reply`
        (content valid text, "" when none). A stop during the call → `RunStopped`; a failure → `RunEnded`."""
        try:
            answered = complete(models=self._models, messages=op.messages, tools=op.offer, timeout=self._seconds_left, on_retry=self._on_retry,
                                generation={"run_id": self.run.id}, stop=self.stop)
        except CompletionStopped as exc:
            self.outcome.attempts += exc.attempts
            self.outcome.model = exc.model
            raise self._stopped() from exc
        except CompletionFailed as exc:
            self.outcome.attempts += exc.attempts
            self.outcome.model = exc.model
            raise RunEnded(exc.reason) from exc
        self.outcome.attempts += answered.attempts
        self.outcome.model = answered.model
        if answered.failed_over:
            self._models = self._models[self._models.index(answered.model):]
        self._add_usage(answered.completion)
        message = answered.completion.choices[0].message
        calls = list(message.tool_calls or [])
        return Reply(valid_text(message.content) if message.content is not None else "", calls,
                     [call.model_dump(mode="json", exclude_none=True) for call in calls], answered.model)

    def _call_tool(self, toolbox: ToolBox, name: str, raw: str, arguments: dict) -> tuple[str, bool]:
        """Run one coding tool; a stop kills a running command's process tree (issue 25).

        Raises `RunStopped` when the stop interrupted the call: no result is recorded, and a
        killed command's output so far is kept (masked, clipped) for the run's end.
        """
        if name != "run":
            return toolbox.call(name, raw)
        try:
            return run_stoppable(lambda: toolbox.acall(name, raw), self.stop)
        except CommandCancelled as killed:
            command = arguments.get("command") if isinstance(arguments.get("command"), str) else ""
            self.outcome.stopped_command = stopped_command(name=name, command=masked(command), output=masked(valid_text(killed.result.output)))
            raise self._stopped() from None

    def _push_after_stop(self) -> bool:
        """Return True when the stop that ended the run asked for the commits made so far to be pushed."""
        command = self.stop.command or {}
        return bool(command.get("push")) and self.stop.is_set()

    def _push(self) -> None:
        head = self.git.head()
        self.outcome.head_sha = head
        self.outcome.changed = head != self.start_sha
        if not self.outcome.changed:
            return
        self.outcome.diffstat = self.git.diffstat(self.start_sha, head)
        remote_url = self.repo.clone_url
        check_reachable(remote_url)
        credential = credential_value(self.repo.credential, org=self.org_slug) if self.repo.credential else None
        if self.repo.credential and credential is None:
            raise RunEnded(f"push credential {self.repo.credential!r} is not available on this server; {len(self.outcome.commits)} commit(s) kept unpushed")
        try:
            with tracing.tracer().start_as_current_span(tracing.SPAN_TOOL, attributes={tracing.ATTR_TOOL_NAME: SPAN_PUSH}):
                self.git.push(remote_url, self.coding.branch, credential=credential)
        except gitops.GitError as exc:
            raise RunEnded(f"push of {self.coding.branch} was rejected: {exc.reason}") from exc
        self.outcome.pushed = True
        self._log(f"pushed {self.coding.branch} ({head[:12]})", branch=self.coding.branch, head=head)

    def _final_text(self) -> str:
        lines = [self.outcome.summary.strip() or "(no summary)", ""]
        if self.outcome.changed:
            lines += [f"branch: {self.coding.branch}", f"commit: {self.outcome.head_sha}", "", self.outcome.diffstat]
        else:
            lines += ["no changes; nothing pushed"]
        return "\n".join(lines).strip()

    def execute(self) -> CodingOutcome:
        """Run clone → turns → push; return the outcome (`ok` with output, or `error` saying why)."""
        try:
            self._loop()
            self._push()
            self.outcome.status = RunStatus.OK
            self.outcome.output = self._final_text()
        except RunStopped as exc:
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = str(exc)
            self.outcome.finish_reason = FinishReason.STOPPED
            self._record_state()
            if self._push_after_stop():  # the stop said {"push": true}: the commits made so far go out
                try:
                    self._push()
                except (RunEnded, ApiError, gitops.GitError) as failed:
                    self.outcome.error = f"{self.outcome.error}; the push it asked for failed: {getattr(failed, 'message', None) or failed}"
        except (RunEnded, ApiError) as exc:
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = getattr(exc, "message", None) or str(exc)
            self._record_state()
        except gitops.GitError as exc:
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = f"git failed: {exc.reason}"
            self._record_state()
        except Exception as exc:
            logger.exception("coding run %s failed unexpectedly", self.run.id)
            self.outcome.status = RunStatus.ERROR
            self.outcome.error = f"internal error: {type(exc).__name__}"
        finally:
            gitops.workspace_remove(self.workspace)
        return self.outcome

    def _record_state(self) -> None:
        """After a failure, keep what the working copy had (head, diffstat) in the outcome."""
        try:
            if self.git is not None and self.start_sha:
                head = self.git.head()
                self.outcome.head_sha = head
                self.outcome.changed = head != self.start_sha
                if self.outcome.changed:
                    self.outcome.diffstat = self.git.diffstat(self.start_sha, head)
        except Exception:
            logger.warning("coding run %s: final state unreadable", self.run.id, exc_info=True)
