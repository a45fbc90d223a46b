"""Typed errors of the coding surface (rendered by the one error handler)."""

from agents_site.errors import ApiError, Conflict, InvalidRequest, NotFound
from agents_site.vocabulary import ErrorCode


class RepoNotFound(NotFound):
    """404: no repository of that owner/name in the caller's org (another org's is the same 404)."""

    default_message = "repo not found"


class RepoExists(Conflict):
    """409: the org already registered a repository of that owner/name."""

    code = ErrorCode.REPO_EXISTS
    default_message = "a repo of that owner/name is already registered"


class CodingBusy(ApiError):
    """429: the org has AGENTS_CODING_MAX_CONCURRENT coding runs in flight; nothing was started."""

    status = 429
    code = ErrorCode.CODING_BUSY
    default_message = "too many coding runs in flight for this org"


class BaseNotFound(InvalidRequest):
    """400 `base_not_found`: the remote has no branch `base` (asked with `git ls-remote` before the 202).

    Extras: `base` (the branch name). Nothing was started, held or billed.
    """

    code = ErrorCode.BASE_NOT_FOUND
    default_message = "the base branch does not exist in the repo"
