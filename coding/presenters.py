"""Wire views of repositories and coding runs."""

from __future__ import annotations

from agents_site.wire import rfc3339
from coding.models import CodingRun, Repo


def repo_view(repo: Repo) -> dict:
    """Return `{id, repo, owner, name, cloneUrl, defaultBranch, credential, createdAt, updatedAt}`."""
    return {
        "id": repo.id, "repo": repo.full_name, "owner": repo.owner, "name": repo.name, "cloneUrl": repo.clone_url,
        "defaultBranch": repo.default_branch, "credential": repo.credential,
        "createdAt": rfc3339(repo.created_at), "updatedAt": rfc3339(repo.updated_at),
    }


def coding_run_view(coding: CodingRun, run) -> dict:
    """Return a coding run with its run's status and error, server or routed alike (a routed run's
    row is filled from the machine's report when it settles: `coding.routing.routed_coding_summarise`)."""
    return {
        "runId": coding.run_id, "sessionId": coding.session_id, "repo": coding.repo, "branch": coding.branch,
        "base": coding.start_ref, "after": coding.after, "status": run.status if run else "", "changed": coding.changed,
        "pushed": coding.pushed, "commitSha": coding.head_sha, "diffstat": coding.diffstat, "commits": [{k: v for k, v in c.items() if k != "patch"} for c in coding.commits or []],
        "targetId": coding.target_id, "error": (run.error if run else ""), "createdAt": rfc3339(coding.created_at),
        "replyConversationId": coding.reply_conversation_id,
    }
