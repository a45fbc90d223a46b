"""Writes of the coding surface: repositories (POST/PATCH/DELETE /v1/agents/repos) and coding
runs (POST /v1/agents/coding → 202; executed by `coding_execute` in a django-q2 worker).
Org context required throughout.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.execution.service import run_span
from agents.models import Agent
from runs.models import Run
from runs.run_session import RunSession
from agents_site.errors import Forbidden, InvalidRequest, NotFound
from agents_site.vocabulary import CodingTool, RunStatus
from coding import runs
from coding.engine import CodingLoop, branch_for
from coding.errors import BaseNotFound, RepoExists
from coding.git import remote_has_branch, valid_branch
from coding.models import CodingRun, Repo
from coding.remotes import check_at_create, check_credential_name
from coding.replies import coding_pushed_announce, coding_reply_post
from coding.routing import check_target, routed_coding_offer
from coding.schemas import max_timeout_seconds
from coding.selectors import NAME_RE, coding_run_by_session, repo_get_by_full_name
from tenancy import stores
from chat.services import conversation_exists
from agents.approval_rules import has_rules
from agents.selectors import agent_get
from coding.sandbox import get_sandbox, require_sandbox

logger = logging.getLogger(__name__)

EXECUTE_TASK = "coding.tasks.execute_coding_run"
UNSET = object()


def _require_admin(principal) -> None:
    if not getattr(principal, "is_org_admin", False):
        raise Forbidden("only an org admin can manage repos")


def _clean_name(value: object, field: str) -> str:
    if not isinstance(value, str) or not NAME_RE.fullmatch(value.strip()):
        raise InvalidRequest(f"{field} must be 1–100 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return value.strip()


def _clean_branch(value: object, field: str) -> str:
    if not isinstance(value, str) or not valid_branch(value.strip()):
        raise InvalidRequest(f"{field} is not a valid branch name")
    return value.strip()


# -- repositories ----------------------------------------------------------------------------


def repo_create(*, principal, owner: object, name: object, clone_url: object, default_branch: object = None, credential: object = None) -> Repo:
    """Register repository `owner/name` in the caller's org; return it.

    Raises `Forbidden` (403) for a non-admin, `InvalidRequest` (400) for a bad name, clone URL
    (`coding.remotes`), branch or a credential the operator did not grant to this org,
    `RepoExists` (409) for a duplicate. Nothing is stored on error.
    """
    _require_admin(principal)
    owner, name = _clean_name(owner, "owner"), _clean_name(name, "name")
    url = check_at_create(clone_url).url
    branch = _clean_branch(default_branch, "defaultBranch") if default_branch not in (None, "") else "main"
    credential = check_credential_name(credential, org=principal.org_slug)
    now = timezone.now()
    try:
        with stores.org_atomic():
            if Repo.objects.filter(owner=owner, name=name).exists():
                raise RepoExists()
            return Repo.objects.create(owner=owner, name=name, clone_url=url, default_branch=branch, credential=credential,
                                       created_by=principal.actor[:300], created_at=now, updated_at=now)
    except IntegrityError as exc:
        raise RepoExists() from exc


def repo_update(*, principal, repo: Repo, clone_url=UNSET, default_branch=UNSET, credential=UNSET) -> Repo:
    """Change a repository's clone URL, default branch or credential name; return it (admins only)."""
    _require_admin(principal)
    if clone_url is not UNSET:
        repo.clone_url = check_at_create(clone_url).url
    if default_branch is not UNSET:
        repo.default_branch = _clean_branch(default_branch, "defaultBranch")
    if credential is not UNSET:
        repo.credential = check_credential_name(credential, org=principal.org_slug)
    repo.updated_at = timezone.now()
    repo.save()
    return repo


def repo_delete(*, principal, repo: Repo) -> None:
    """Remove a repository (admins only). Runs keep their recorded `owner/name`."""
    _require_admin(principal)
    repo.delete()


# -- coding runs -------------------------------------------------------------------------------


def _timeout_or_default(value: int | None) -> int:
    """Return the run's timeout in seconds: `value` (checked by `CodingIn`), else `AGENTS_CODING_TIMEOUT_SECONDS` capped."""
    return value or min(settings.AGENTS_CODING_TIMEOUT_SECONDS, max_timeout_seconds())


def _earlier_run(after: str, *, repo: Repo) -> CodingRun | None:
    """Return the coding run whose session `after` names (None for ""): 404 unknown, 400 another repo or nothing pushed."""
    if not after:
        return None
    earlier = coding_run_by_session(session_id=after)
    if earlier is None:
        raise NotFound("after: no coding run with that session id")
    if earlier.repo_id != repo.id:
        raise InvalidRequest("after: that coding run worked on another repo")
    if not earlier.pushed:
        raise InvalidRequest("after: that coding run pushed no branch to continue from")
    return earlier


def _driving_agent(agent_ref: str | None) -> Agent | None:
    """Return the agent `agent_ref` names (None for none): 404 unknown, 400 one with approval rules."""
    agent = agent_get(ref=agent_ref) if agent_ref else None
    if has_rules(agent):  # issue 28: approvals are for agent runs and chat rounds; a coding run cannot wait for one yet
        raise InvalidRequest(f"agentRef: agent {agent.name!r} has approval rules, which coding runs do not support; "
                             "remove its approval rules or run it with POST /v1/agents/{ref}/run")
    return agent


def _where_it_runs(target_id: str | None) -> str:
    """Return the machine id a routed run goes to (it must pass the dispatch gate), or "" after checking the sandbox here."""
    if target_id:
        return check_target(target_id)
    require_sandbox()
    return ""


def _clean_reply_conversation(value: object) -> str:
    """Return conversation id `value` ("" for none) when it names a conversation of this org; else `NotFound` (404)."""
    if value in (None, ""):
        return ""
    if not isinstance(value, str) or len(value) > 64 or not conversation_exists(value):
        raise NotFound("replyConversationId: no conversation with that id")
    return value


def coding_start(*, principal, prompt: str, repo: str, project: str = "", base: str = "", after: str | None = None,
                 agent_ref: str | None = None, target_id: str | None = None, timeout_seconds: int | None = None,
                 tool: str = CodingTool.DEV, reply_conversation_id: str | None = None, request_id: str = "") -> tuple[Run, CodingRun]:
    """Admit one coding run (spec 000; reference §8.2) and queue it; return `(run, coding run)`.

    The fields arrive checked by the request schema (`coding.schemas.CodingIn`: unsupported
    fields, `tool`, `prompt`, `project`, `base`, `timeoutSeconds`, each a 400 there); here, in
    this order, what needs the org's data: repo `owner/name` of this org (404) → `after` (an earlier
    coding run's session of this org on the same repo that pushed its branch: 404 / 400) →
    `agentRef` (404; 400 for an agent with approval rules) → `targetId` (routed: the machine must pass the
    dispatch gate) → `replyConversationId` (a conversation of this org, else 404) → for a run
    here, the start branch on the remote (`git ls-remote`, ≤ 10 s; 400 `base_not_found` naming
    it when the remote answers without it) → the sandbox (503 `sandbox_unavailable`) for a run here
    → the run lifecycle's start under the `coding` kind's `RunPolicy` (`coding.apps`): inference
    for a run here (503), then in one org-store transaction serialised per org (on PostgreSQL the
    gate's advisory lock, taken before the count: no two starts count one free slot) the org's
    coding runs in flight (429 at `AGENTS_CODING_MAX_CONCURRENT`), the balance gate (402/503), the
    run, its session and this record; the task is queued once that commits. `base` wins over `after`.
    """
    the_repo = repo_get_by_full_name(repo)
    earlier = _earlier_run(after or "", repo=the_repo)
    agent = _driving_agent(agent_ref)
    timeout = _timeout_or_default(timeout_seconds)
    target = _where_it_runs(target_id)
    reply_to = _clean_reply_conversation(reply_conversation_id)
    start_ref = base or (earlier.branch if earlier else "") or the_repo.default_branch
    if not target and remote_has_branch(the_repo.clone_url, start_ref) is False:
        raise BaseNotFound(f"branch {start_ref!r} does not exist in {the_repo.full_name}", base=start_ref)
    org = stores.current_org()
    with runs.coding_run_starting(
        agent=agent, agent_name=agent.name if agent else f"coding-{tool}", input=prompt, actor=principal.actor,
        request_id=request_id, session_fields={"repo": the_repo.full_name, "project": project, "target": target}, target_id=target,
    ) as run:  # the coding record (and a routed run's offer) commit with the run, or nothing does
        session_id = run.session_id
        coding = CodingRun.objects.create(
            run_id=run.id, session_id=session_id, repo_id=the_repo.id, repo=the_repo.full_name, project=project, base=base,
            after=earlier.session_id if earlier else "", start_ref=start_ref, branch=branch_for(session_id), tool=tool,
            target_id=target, timeout_seconds=timeout, created_at=run.created_at, reply_conversation_id=reply_to,
        )
        if target:  # a routed run is running from its offer on; the machine's report settles it
            routed_coding_offer(run=runs.coding_run_begin(run_id=run.id), coding=coding, repo=the_repo)
        else:  # the queue hears of it once the run and its record are committed
            run_id = run.id
            transaction.on_commit(lambda: coding_dispatch(org=org, run_id=run_id), using=stores.current_alias())
    return run, coding


def coding_dispatch(*, org: str, run_id: str) -> str | None:
    """Hand coding run `run_id` of `org` to django-q2; return the task id (None when the broker refused)."""
    from django_q.tasks import async_task

    try:
        return async_task(EXECUTE_TASK, org, run_id, task_name=run_id, group="coding.run")
    except Exception:
        logger.exception("could not enqueue coding run %s of %s", run_id, org)
        return None


def coding_execute(*, run_id: str) -> str:
    """Execute queued coding run `run_id` here (in a worker); return its final status ("" if unknown).

    A run no longer queued (cancelled, taken by another worker) is left alone. Org context required.
    """
    run = runs.coding_run_begin(run_id=run_id)
    if run is None:
        return Run.objects.filter(pk=run_id).values_list("status", flat=True).first() or ""
    coding = CodingRun.objects.get(pk=run_id)
    session = RunSession.attach(session_id=run.session_id, actor=run.actor) if run.session_id else RunSession(actor=run.actor)
    repo = Repo.objects.filter(pk=coding.repo_id).first()
    sandbox = get_sandbox()
    if repo is None or not sandbox.available():
        error = "the repo was removed before the run started" if repo is None else f"no sandbox: {sandbox.unavailable_reason()}"
        return runs.coding_run_finish(run=run, session=session, status=RunStatus.ERROR, error=error).status
    deadline = time.monotonic() + coding.timeout_seconds
    with run_span(run_id=run.id, agent_name=run.agent_name, actor=run.actor, model=run.model, kind=run.kind) as span:
        try:
            outcome = CodingLoop(run=run, coding=coding, repo=repo, agent=run.agent, session=session,
                                 org_slug=stores.current_org(), sandbox=sandbox, deadline=deadline).execute()
        except Exception as exc:  # CodingLoop never raises; this guards a bug so the run cannot stay running
            logger.exception("coding run %s crashed", run_id)
            return runs.coding_run_finish(run=run, session=session, status=RunStatus.ERROR, error=f"internal error: {type(exc).__name__}",
                                          span=span).status
        CodingRun.objects.filter(pk=run_id).update(
            changed=outcome.changed, pushed=outcome.pushed, head_sha=outcome.head_sha, diffstat=outcome.diffstat,
            commits=[c.as_dict(with_patch=True) for c in outcome.commits],
        )
        finished = runs.coding_run_finish(
            run=run, session=session, status=outcome.status, output=outcome.output, error=outcome.error, model=outcome.model,
            attempts=outcome.attempts, prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
            tool_calls=outcome.tool_calls, summary=outcome.report(), finish_reason=outcome.finish_reason, span=span,
        )
    final = CodingRun.objects.get(pk=run_id)
    coding_reply_post(coding=final, run=finished)
    coding_pushed_announce(coding=final, run=finished or run)
    return finished.status
