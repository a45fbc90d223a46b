"""Registries through which higher apps hear about sessions without being imported.

* `register_session_published_handler(fn)`: `fn(session)` is called once a change that
  published a session (`published` false → true, `sessions.services.session_update`) has
  committed, in org context. What it raises is logged and never undoes the change.
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
