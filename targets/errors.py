"""Typed errors of the targets capability (rendered in the one error shape)."""

from agents_site.errors import ApiError, Forbidden, NotFound
from agents_site.vocabulary import ErrorCode


class TargetNotFound(NotFound):
    """404: unknown id, another org's id, or (for edits, delete and key) another member's machine."""

    default_message = "target not found"


class ClaimRejected(Forbidden):
    """403: a claim or report failed one of its two proofs (owner/admin AND the claim key).

    Every failure answers this same body, so a probe learns nothing about which proof failed.
    """

    code = ErrorCode.CLAIM_REJECTED
    default_message = "target claim rejected"


class TargetUnavailable(ApiError):
    """409: the dispatch gate refused the machine; `error` says why (offline, draining, …)."""

    status = 409
    code = ErrorCode.TARGET_UNAVAILABLE
    default_message = "target unavailable"
