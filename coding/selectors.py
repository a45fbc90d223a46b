"""Reads of the coding surface: repositories and coding runs of the current org."""

from __future__ import annotations

import re

from coding.errors import RepoNotFound
from coding.models import CodingRun, Repo

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def repo_list() -> list[Repo]:
    """Return the org's repositories ordered by owner then name. Org context required."""
    return list(Repo.objects.order_by("owner", "name"))


def repo_get(*, owner: str, name: str) -> Repo:
    """Return repository `owner/name` of the org; raise `RepoNotFound` (404) otherwise."""
    if not NAME_RE.fullmatch(owner or "") or not NAME_RE.fullmatch(name or ""):
        raise RepoNotFound()
    repo = Repo.objects.filter(owner=owner, name=name).first()
    if repo is None:
        raise RepoNotFound()
    return repo


def repo_get_by_full_name(full_name: object) -> Repo:
    """Return the repository named `owner/name`; raise `RepoNotFound` (404) for anything else."""
    if not isinstance(full_name, str) or full_name.count("/") != 1:
        raise RepoNotFound()
    owner, name = full_name.strip().split("/")
    return repo_get(owner=owner, name=name)


def coding_run_by_session(*, session_id: str) -> CodingRun | None:
    """Return the coding run whose session is `session_id`, or None."""
    if not session_id or len(session_id) > 64:
        return None
    return CodingRun.objects.filter(session_id=session_id).first()


def coding_run_get(*, run_id: str) -> CodingRun | None:
    """Return the coding run record of run `run_id`, or None."""
    return CodingRun.objects.filter(pk=run_id).first()


def coding_runs_recent(*, limit: int) -> list[CodingRun]:
    """Return the org's newest `limit` coding runs, newest first."""
    return list(CodingRun.objects.order_by("-created_at")[:limit])
