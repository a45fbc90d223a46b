"""The one registry through which higher apps hear about sessions without being imported.

* `register_session_observer(observer)`: a `SessionObserver` — what an app above sessions does at a
  session's moments. One object per observing app, as a run's observers are one `RunObserver`
  each (`runs.hooks`) and a kind of run is one `RunPolicy`:
  - `guard_command(*, session, command)`: called before a steering command is recorded
    (`sessions.control.control_send`); what it raises (an `ApiError`) refuses the command and
    nothing is stored (runs: `resume` while an approval is pending → 409).
  - `take_command(*, session, command, message) -> bool`: called for a command no live executor
    receives; True when the app took it (answered `forwarded: true`): runs (a queued run's task,
    a run waiting for approval), targets (a routed run's unclaimed offer).
  - `pending_approvals(session_id) -> list[dict] | None`: the approval requests the session's run
    waits on (runs, issue 28), shown on `GET …/sessions/{id}` as `pendingApprovals`; None: not
    this app's to say. Without an answer a session has none.
  - `published(session)`: called once a change that published a session (`published` false →
    true, `sessions.services.session_update`) has committed, in org context (webhooks:
    `session.published`). What it raises is logged and never undoes the change.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


class SessionObserver:
    """What an app above sessions does at a session's moments (a subclass overrides what it needs)."""

    def guard_command(self, *, session, command: str) -> None:
        """Raise an `ApiError` to refuse steering `command` on `session` before it is recorded."""

    def take_command(self, *, session, command: str, message: str | None) -> bool:
        """Take `command` for `session`, which has no live executor; return True when taken."""
        return False

    def pending_approvals(self, session_id: str) -> list[dict] | None:
        """Return the approval requests the session's run waits on, or None when this app does not own it."""
        return None

    def published(self, session) -> None:
        """Act once `session` was published (the change has committed)."""


_observers: list[SessionObserver] = []


def register_session_observer(observer: SessionObserver) -> None:
    """Let `observer` hear every session's moments (from its app's `AppConfig.ready`; idempotent per object)."""
    if observer not in _observers:
        _observers.append(observer)


def observers() -> list[SessionObserver]:
    """Return the registered observers, in registration order."""
    return list(_observers)


def session_published_handlers(session) -> None:
    """Call every observer's `published(session)`; log (never raise) what one raises."""
    for observer in list(_observers):
        try:
            observer.published(session)
        except Exception:
            logger.exception("session %s: a published handler failed", getattr(session, "id", "?"))


def pending_approvals(session_id: str) -> list[dict]:
    """Return the pending approval requests of session `session_id` (the first observer's answer; [] for none). Org context."""
    for observer in list(_observers):
        found = observer.pending_approvals(session_id)
        if found is not None:
            return list(found)
    return []
