"""Routes of the coding surface: /v1/agents/repos… and POST /v1/agents/coding (reference §8.2).

Mounted before the agents router so `/{ref}` never shadows `repos` or `coding`. Thin: parse,
call one service or selector, shape. Org admins manage repos; every member reads them.
"""

from __future__ import annotations

import secrets

from django.http import JsonResponse
from ninja import Router
from ninja.responses import Status

from runs.hooks import request_callback
from runs import selectors as run_selectors
from agents_site.schemas import ErrorOut
from coding import selectors, services
from coding.presenters import coding_run_view, repo_view
from coding.schemas import CodingIn, CodingRunOut, CodingStartedOut, RepoCreateIn, RepoDeletedOut, RepoIn, RepoListOut, RepoOut
from tenancy.principal import require_org
from agents_site.errors import NotFound

repos_router = Router(tags=["coding"])
coding_router = Router(tags=["coding"])

_ERRORS = {400: ErrorOut, 403: ErrorOut, 404: ErrorOut}


def _request_id(request) -> str:
    given = (request.headers.get("X-Request-Id") or "").strip()
    return given[:128] if given else "req_" + secrets.token_hex(12)


@repos_router.get("", response=RepoListOut, summary="List the org's repos")
def list_repos(request):
    """Return `{"repos": [...]}` ordered by owner, name (any member)."""
    return {"repos": [repo_view(r) for r in selectors.repo_list()]}


@repos_router.post("", response={201: RepoOut, 409: ErrorOut, **_ERRORS}, summary="Register a repo (org admins)")
def create_repo(request, payload: RepoCreateIn):
    """Register a repository → 201; 400 for a bad name, URL, branch or credential; 403 non-admin; 409 duplicate."""
    owner, name = payload.owner, payload.name
    if payload.repo is not None and owner is None and name is None:
        owner, _, name = payload.repo.partition("/")
    repo = services.repo_create(principal=require_org(request.auth), owner=owner, name=name, clone_url=payload.cloneUrl,
                                default_branch=payload.defaultBranch, credential=payload.credential)
    return Status(201, repo_view(repo))


@repos_router.get("/{owner}/{name}", response={200: RepoOut, 404: ErrorOut}, summary="Read one repo")
def get_repo(request, owner: str, name: str):
    """Return repository `owner/name` of the caller's org (404 otherwise)."""
    return repo_view(selectors.repo_get(owner=owner, name=name))


@repos_router.patch("/{owner}/{name}", response={200: RepoOut, **_ERRORS}, summary="Change a repo (org admins)")
def patch_repo(request, owner: str, name: str, payload: RepoIn):
    """Change `cloneUrl`, `defaultBranch` or `credential` (`""` clears the credential; JSON null is an omitted field)."""
    repo = selectors.repo_get(owner=owner, name=name)
    given = payload.model_dump(exclude_unset=True, exclude_none=True)
    changes = {}
    if "cloneUrl" in given:
        changes["clone_url"] = given["cloneUrl"]
    if "defaultBranch" in given:
        changes["default_branch"] = given["defaultBranch"]
    if "credential" in given:
        changes["credential"] = given["credential"]
    return repo_view(services.repo_update(principal=require_org(request.auth), repo=repo, **changes))


@repos_router.delete("/{owner}/{name}", response={200: RepoDeletedOut, **_ERRORS}, summary="Remove a repo (org admins)")
def delete_repo(request, owner: str, name: str):
    """Remove repository `owner/name` → `{"deleted": true, "repo"}`."""
    repo = selectors.repo_get(owner=owner, name=name)
    services.repo_delete(principal=require_org(request.auth), repo=repo)
    return {"deleted": True, "repo": repo.full_name}


@coding_router.post(
    "",
    response={202: CodingStartedOut, 402: ErrorOut, 429: ErrorOut, 503: ErrorOut, **_ERRORS},
    summary="Start a coding run",
)
def start_coding(request, payload: CodingIn):
    """Admit one coding run → 202 `{sessionId, runId, branch, repo, routed, targetId}`.

    The session id is the handle: progress streams through the sessions API. 400 bad input
    (an unsupported `tool` names the supported ones), 404 repo/agent/after not in the org,
    402 balance, 429 too many coding runs in flight, 503 no sandbox or no inference. 400
    `base_not_found` when the remote lacks the start branch; 404 for an unknown
    `replyConversationId`; `desktop`, `replyChannel`, `replyThread` → 400 "not supported here".
    `webhook`: this run's own `run.finished` callback, a URL under one of the org's webhook
    endpoints (else 400).
    """
    principal = require_org(request.auth)
    with request_callback(payload.webhook):  # 400 for a URL outside the org's webhook endpoints
        run, coding = services.coding_start(
            principal=principal, prompt=payload.prompt, repo=payload.repo, project=payload.project, base=payload.base,
            after=payload.after, agent_ref=payload.agentRef, target_id=payload.targetId, timeout_seconds=payload.timeoutSeconds,
            tool=payload.tool, reply_conversation_id=payload.replyConversationId, request_id=_request_id(request),
        )
    body = {"sessionId": coding.session_id, "runId": run.id, "branch": coding.branch, "repo": coding.repo,
            "routed": bool(coding.target_id), "targetId": coding.target_id}
    response = JsonResponse(body, status=202)
    response["Location"] = f"/v1/agents/coding/{run.id}"
    return response


@coding_router.get("/{run_id}", response={200: CodingRunOut, 404: ErrorOut}, summary="Read one coding run")
def get_coding_run(request, run_id: str):
    """Return a coding run of the caller's org: branch, commits, push, status (404 otherwise)."""
    coding = selectors.coding_run_get(run_id=run_id)
    if coding is None:
        raise NotFound("coding run not found")
    return coding_run_view(coding, run_selectors.run_find(run_id=run_id))
