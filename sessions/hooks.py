"""Registries through which higher apps hear about sessions without being imported.

* `register_session_published_handler(fn)`: `fn(session)` is called once a change that
  published a session (`published` false → true, `sessions.services.session_update`) has
  committed, in org context. What it raises is logged and never undoes the change.
* `register_pending_approvals(fn)`: `fn(session_id) -> list[dict]` returns the approval requests
  the session's run waits on (agents, issue 28), shown on `GET …/sessions/{id}` as
  `pendingApprovals`. The last registration wins; without one a session has none.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger(__name__)

_published_handlers: list[Callable] = []


def register_session_published_handler(fn: Callable) -> None:
    """Call `fn(session)` after every session is published (idempotent per function)."""
    if fn not in _published_handlers:
        _published_handlers.append(fn)


def session_published_handlers(session) -> None:
    """Call every registered published handler with `session`; log (never raise) what one raises."""
    for fn in list(_published_handlers):
        try:
            fn(session)
        except Exception:
            logger.exception("session %s: a published handler failed", getattr(session, "id", "?"))


_pending: list[Callable] = []


def register_pending_approvals(fn: Callable) -> None:
    """Use `fn(session_id) -> list[dict]` for the approval requests a session's run waits on."""
    _pending[:] = [fn]


def pending_approvals(session_id: str) -> list[dict]:
    """Return the pending approval requests of session `session_id` ([] without a registered reader). Org context."""
    return list(_pending[0](session_id)) if _pending else []
