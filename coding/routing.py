"""Routed coding runs (`targetId`): the run is offered to a registered machine (reference §1.9).

The offer carries the routed-run fields `{kind: "coding", repo, project, base, branch, prompt,
cloneUrl, timeoutSeconds, tool, limits}` and no credential: the machine clones with its own access,
runs the same tools (in bubblewrap where it has it), commits with the same trailers, pushes,
streams its events into the run's session (each commit as it is made) and reports `{ok,
changed, pushed, branch, commitSha, diffstat, commits, summary, error}` through the targets
report route, which settles the run like every routed run and, through the report handlers
registered in `CodingConfig.ready`, fills the coding-run record and final event exactly as a
server run's (`routed_coding_summarise`). The machine checks `base` after its clone and ends
the run with `base_not_found` when the remote lacks it. `base` is where the run starts (the request's `base`, else the `after` run's branch,
else the repo's default branch). Org context required.
"""

from __future__ import annotations

from runs.models import Run
from agents_site.vocabulary import RunStatus
from coding.engine import coding_bounds
from coding.models import CodingRun, Repo
from coding.replies import coding_pushed_announce, coding_reply_post
from agents_site.errors import InvalidRequest
from targets.selectors import target_dispatchable
from targets import mailbox
from sessions.models import Event
from sessions.presenters import payload_value

CODING_OFFER = "coding"


def check_target(target_id: object) -> str:
    """Return the id of machine `target_id` if a run may be routed to it now.

    Raises `TargetNotFound` (404) or `TargetUnavailable` (409: offline, draining, keyless,
    not claiming) — the dispatch gate every routed run passes; never a fallback to this server.
    """
    if not isinstance(target_id, str) or not target_id.strip():
        raise InvalidRequest("targetId must be a machine id")
    return target_dispatchable(target_id=target_id.strip()).id


def routed_coding_payload(*, coding: CodingRun, repo: Repo, prompt: str) -> dict:
    """Return what the machine's claim receives for coding run `coding` (never a credential)."""
    return {
        "kind": CODING_OFFER, "repo": repo.full_name, "project": coding.project, "base": coding.start_ref,
        "branch": coding.branch, "prompt": prompt, "cloneUrl": repo.clone_url, "timeoutSeconds": coding.timeout_seconds,
        "tool": coding.tool, "limits": coding_bounds().as_wire(),
    }


def routed_coding_offer(*, run: Run, coding: CodingRun, repo: Repo) -> None:
    """Offer coding run `run` to its machine inside the caller's transaction (the run is `running`)."""
    mailbox.routed_offer(target_id=coding.target_id, run_id=run.id, session_id=coding.session_id,
                         payload=routed_coding_payload(coding=coding, repo=repo, prompt=run.input))


def routed_coding_summarise(*, run_id: str, result: dict) -> dict | None:
    """Record a routed coding run's report like a server run's; return its summary fields (None for another run).

    Updates the `CodingRun` row (changed, pushed, head, diffstat, commits — each commit's patch
    taken from the `commit` event the machine streamed) and returns `{changed, pushed, branch,
    commitSha, diffstat, commits, text, summary}` for the final `log` event, the shape the server's engine writes.
    Called by `targets.settle` inside the report's org transaction.
    """
    coding = CodingRun.objects.filter(pk=run_id).first()
    if coding is None:
        return None
    commits = [dict(c) for c in result.get("commits") or []]
    patches = {}
    for event in Event.objects.filter(session_id=coding.session_id, kind="commit").only("payload"):
        payload = payload_value(event.payload)
        if isinstance(payload, dict) and isinstance(payload.get("commit"), str):
            patches[payload["commit"]] = payload.get("patch") or ""
    changed = result.get("changed") is True
    # A stop that said {"push": true} pushes the commits of a run that ends `error` (issue 25):
    # the machine's `pushed` is what happened, whatever the status.
    pushed = changed and result.get("pushed") is True
    CodingRun.objects.filter(pk=run_id).update(
        changed=changed, pushed=pushed, head_sha=result.get("commitSha") or "", diffstat=result.get("diffstat") or "",
        commits=[{**c, "patch": patches.get(c["sha"], "")} for c in commits],
    )
    text = result.get("output") if result.get("status") == RunStatus.OK else result.get("error")
    return {"text": text or "", "summary": result.get("summary") or "", "changed": changed, "pushed": pushed, "branch": coding.branch, "commitSha": result.get("commitSha") or "",
            "diffstat": result.get("diffstat") or "", "commits": commits}


def routed_coding_settled(*, run: Run) -> None:
    """After a routed coding run is settled: post its summary to its `replyConversationId` (if any) and,
    when the machine pushed, emit `coding.pushed` as a server run does (`coding_pushed_announce`)."""
    coding = CodingRun.objects.filter(pk=run.id).first()
    if coding is not None:
        coding_reply_post(coding=coding, run=run)
        coding_pushed_announce(coding=coding, run=run)
