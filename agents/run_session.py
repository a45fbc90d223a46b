"""The thin seam between a run and its live session (issue 4 item 4, spec 003 POST …/run).

A run opens a root session when it starts (`agent` = the agent's name, `title` = the start of
the input), appends `message` / `tool-call` / `log` events as it goes, reports `paused` /
`running` while it is held, and ends the session `done` or `error`. While it runs, an executor
inbox (`sessions.control.ExecutorInbox`) delivers the pause/resume/stop/message commands posted
to the session, so those commands answer `forwarded: true`.

Every call here is best-effort: a bookkeeping failure in the session is logged and swallowed,
and never fails the run (the run and its billing already happened). With the sessions
capability absent the seam records nothing and its inbox is always empty.
"""

from __future__ import annotations

import json
import logging
import threading
import time

from agents_site.vocabulary import EventKind, SessionStatus

logger = logging.getLogger(__name__)

TITLE_BYTES = 120
TEXT_PREVIEW_BYTES = 16 * 1024  # event payloads stay well under the 64 KiB event limit


def session_title(text: str) -> str:
    """Return a session title: `text` trimmed, cut to 120 bytes (whole characters), or "agent run"."""
    title = (text or "").strip().encode()[:TITLE_BYTES].decode(errors="ignore").strip()
    return title or "agent run"


def clip(text: str, limit: int = TEXT_PREVIEW_BYTES) -> str:
    """Return `text` cut to `limit` UTF-8 bytes (whole characters)."""
    raw = (text or "").encode()
    return text if len(raw) <= limit else raw[:limit].decode(errors="ignore") + "…"


class RunSession:
    """One run's session: `session_id` ("" when none could be opened) and its inbox.

    Build with `RunSession.open(...)`; every method swallows its own failures.
    """

    def __init__(self, *, actor: str) -> None:
        self.session_id = ""
        self.actor = actor
        self._inbox = None

    @classmethod
    def open(cls, *, agent_name: str, actor: str, title: str, parent_session_id: str = "") -> RunSession:
        """Open a `running` root session (or a child of `parent_session_id`) and its inbox."""
        session = cls(actor=actor)
        try:
            from sessions import services as session_services
        except ImportError:
            return session
        try:
            created = session_services.session_create(
                agent=agent_name,
                actor=actor,
                title=session_title(title),
                status=SessionStatus.RUNNING,
                parent_session_id=parent_session_id or None,
            )
            session.session_id = str(created.id)
        except Exception:
            logger.warning("run session could not be opened", exc_info=True)
            return session
        try:
            from sessions.control import ExecutorInbox

            session._inbox = ExecutorInbox.open(session_id=session.session_id)
        except Exception:
            logger.warning("run session %s: executor inbox unavailable", session.session_id, exc_info=True)
        return session

    def append(self, kind: EventKind, payload: dict) -> None:
        """Append one event (`message`, `tool-call`, `log`…) with a JSON-able `payload`."""
        if not self.session_id:
            return
        try:
            from sessions.services import session_append_event

            json.dumps(payload)
            session_append_event(session_id=self.session_id, kind=str(kind), payload=payload, actor=self.actor)
        except Exception:
            logger.warning("run session %s: %s event not recorded", self.session_id, kind, exc_info=True)

    def set_status(self, status: SessionStatus) -> None:
        """Report the session's live status (`paused`, `running`) or its end (`done`, `error`)."""
        if not self.session_id:
            return
        try:
            from sessions.services import session_update

            session_update(session_id=self.session_id, status=str(status))
        except Exception:
            logger.warning("run session %s: status %s not recorded", self.session_id, status, exc_info=True)

    def pending(self) -> list[dict]:
        """Return the steering commands delivered since the last call (oldest first), or []."""
        if self._inbox is None:
            return []
        try:
            return list(self._inbox.pending() or [])
        except Exception:
            logger.warning("run session %s: inbox read failed", self.session_id, exc_info=True)
            return []

    def wait(self, timeout: float) -> dict | None:
        """Wait up to `timeout` seconds for the next command; return it, or None."""
        if self._inbox is None:
            time.sleep(max(timeout, 0))
            return None
        try:
            return self._inbox.wait(timeout)
        except Exception:
            logger.warning("run session %s: inbox wait failed", self.session_id, exc_info=True)
            time.sleep(max(timeout, 0))
            return None

    def actor_of(self, seq: int | None) -> str:
        """Return who recorded the control command with `seq` ("" when it cannot be read)."""
        if not self.session_id or not seq:
            return ""
        try:
            from sessions.selectors import control_commands

            events, _ = control_commands(session_id=self.session_id, after=int(seq) - 1)
            return next((e.actor for e in events if e.seq == int(seq)), "")
        except Exception:
            logger.warning("run session %s: actor of command %s unreadable", self.session_id, seq, exc_info=True)
            return ""

    def close(self, *, status: SessionStatus) -> None:
        """End the session `done`/`error` and stop listening for commands.

        The inbox is closed on a helper thread: closing joins its receiver (up to a poll
        interval, ~0.2 s), which the run's answer need not wait for. Once the session is
        finished every command is refused (409) anyway, so nothing can reach the closing inbox.
        """
        self.set_status(status)
        inbox, self._inbox = self._inbox, None
        if inbox is not None:
            threading.Thread(target=_close_inbox, args=(inbox, self.session_id), name=f"agents-inbox-close-{self.session_id}", daemon=True).start()


def _close_inbox(inbox, session_id: str) -> None:
    from django.db import connections

    try:
        inbox.close()
    except Exception:
        logger.warning("run session %s: inbox close failed", session_id, exc_info=True)
    finally:
        connections.close_all()  # this thread's own connections
