"""Wire views of repositories and coding runs."""

from __future__ import annotations

from agents_site.vocabulary import RunStatus
from agents_site.wire import rfc3339
from coding.models import CodingRun, Repo


def repo_view(repo: Repo) -> dict:
    """Return `{id, repo, owner, name, cloneUrl, defaultBranch, credential, createdAt, updatedAt}`."""
    return {
        "id": repo.id, "repo": repo.full_name, "owner": repo.owner, "name": repo.name, "cloneUrl": repo.clone_url,
        "defaultBranch": repo.default_branch, "credential": repo.credential,
        "createdAt": rfc3339(repo.created_at), "updatedAt": rfc3339(repo.updated_at),
    }


def coding_run_view(coding: CodingRun, run, *, routed: dict | None = None) -> dict:
    """Return a coding run with its run's status and error; a routed run's figures come from
    the machine's report (`routed`: `{changed, branch, commitSha, diffstat}`) once it reported."""
    if routed:
        changed = routed.get("changed") is True
        pushed = changed and run is not None and run.status == RunStatus.OK
        return {**coding_run_view(coding, run), "changed": changed, "pushed": pushed,
                "commitSha": routed.get("commitSha") or "", "diffstat": routed.get("diffstat") or ""}
    return {
        "runId": coding.run_id, "sessionId": coding.session_id, "repo": coding.repo, "branch": coding.branch,
        "base": coding.start_ref, "after": coding.after, "status": run.status if run else "", "changed": coding.changed,
        "pushed": coding.pushed, "commitSha": coding.head_sha, "diffstat": coding.diffstat, "commits": [{k: v for k, v in c.items() if k != "patch"} for c in coding.commits or []],
        "targetId": coding.target_id, "error": (run.error if run else ""), "createdAt": rfc3339(coding.created_at),
    }
