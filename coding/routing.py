"""Routed coding runs (`targetId`): the run is offered to a registered machine (reference §1.9).

The offer carries the routed-run fields `{kind: "coding", repo, project, base, branch, prompt,
cloneUrl, timeoutSeconds, tool, limits}` and no credential: the machine clones with its own access,
runs the same tools (in bubblewrap where it has it), commits with the same trailers, pushes,
streams its events into the run's session and reports `{ok, changed, branch, commitSha,
diffstat, error}` through the targets report route, which settles the run like every routed
run. `base` is where the run starts (the request's `base`, else the `after` run's branch,
else the repo's default branch). Org context required.
"""

from __future__ import annotations

from agents.models import Run
from coding.models import CodingRun, Repo

CODING_OFFER = "coding"


def check_target(target_id: object) -> str:
    """Return the id of machine `target_id` if a run may be routed to it now.

    Raises `TargetNotFound` (404) or `TargetUnavailable` (409: offline, draining, keyless,
    not claiming) — the dispatch gate every routed run passes; never a fallback to this server.
    """
    from agents_site.errors import InvalidRequest
    from targets.selectors import target_dispatchable

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


def coding_bounds():
    """Return the operator's commit bounds (`AGENTS_CODING_MAX_FILE_MB`, `…_PUSH_MB`, `…_REPO_MB`) as `toolkit.commits.Bounds`."""
    from django.conf import settings

    from toolkit.commits import Bounds

    return Bounds.from_mb(file_mb=settings.AGENTS_CODING_MAX_FILE_MB, push_mb=settings.AGENTS_CODING_MAX_PUSH_MB,
                          tree_mb=settings.AGENTS_CODING_MAX_REPO_MB)


def routed_coding_offer(*, run: Run, coding: CodingRun, repo: Repo) -> None:
    """Offer coding run `run` to its machine inside the caller's transaction (the run is `running`)."""
    from targets import mailbox

    mailbox.routed_offer(target_id=coding.target_id, run_id=run.id, session_id=coding.session_id,
                         payload=routed_coding_payload(coding=coding, repo=repo, prompt=run.input))


def routed_result(*, run_id: str) -> dict:
    """Return the machine's clamped report of routed coding run `run_id` ({} before it reports)."""
    from targets.models import RoutedRun

    offer = RoutedRun.objects.filter(pk=run_id).only("result").first()
    return dict(offer.result or {}) if offer is not None else {}
