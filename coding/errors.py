"""Typed errors of the coding surface (rendered by the one error handler)."""

from agents_site.errors import ApiError, Conflict, NotFound
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
