"""Typed errors of the identity API (spec 001); rendered in the one error shape."""

from agents_site.errors import ApiError, Conflict
from agents_site.vocabulary import ErrorCode

AGT_008 = "AGT_008"  # spec 001's code for AGENT_LIMIT_EXCEEDED, kept as the named extra `error_code`


class AgentLimitExceeded(Conflict):
    """409: the creating user already has their quota of identity agents in this org.

    Body: `{"status": 409, "code": "agent_limit_exceeded", "error": …, "error_code": "AGT_008",
    "limit": 50}`.
    """

    code = ErrorCode.AGENT_LIMIT_EXCEEDED

    def __init__(self, limit: int) -> None:
        super().__init__(f"you already have {limit} identity agents in this org (the limit)", error_code=AGT_008, limit=limit)


class RateLimited(ApiError):
    """429: too many requests of this kind; `retry_after` (seconds) says when to try again."""

    status = 429
    code = ErrorCode.RATE_LIMITED
    default_message = "too many requests; retry later"


class RotationLimit(ApiError):
    """429: the agent's token was already rotated the allowed number of times in 24 h."""

    status = 429
    code = ErrorCode.ROTATION_LIMIT


class EnvelopeKeyUnknown(ApiError):
    """400: the envelope names a key that is not a current or in-grace key of its party.

    Body: `{"status": 400, "code": "envelope_key_unknown", "error": …, "key_id": "<kid>",
    "party": "recipient"|"sender"}` — the sender should fetch the recipient's keys again and
    seal to the current one (after an emergency rotation the old key is gone).
    """

    status = 400
    code = ErrorCode.ENVELOPE_KEY_UNKNOWN


class EnvelopeReplayed(Conflict):
    """409: an envelope with this (sender, message id) was already accepted; nothing stored."""

    code = ErrorCode.ENVELOPE_REPLAYED
