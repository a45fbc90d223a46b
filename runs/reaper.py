"""The session reaper: the platform ends sessions left open (reference §6.3).

Run by the `agents: sweep` schedule every minute, across every org. A live session (`running`
or `paused`) open longer than `AGENTS_SESSION_MAX_SECONDS` (default 86400), or a `running`
session with no activity (no event, no update) for `AGENTS_SESSION_IDLE_SECONDS` (default
3600), is ended: a `control` stop event carrying the reason (forwarded to its live executor,
or cancelling its queued task, like any stop), then status `error`. A `paused` session is held
on purpose and is not reaped for idleness, only for age. A session whose run is `waiting` for
an approval is not reaped at all: its one clock is `AGENTS_APPROVAL_TIMEOUT_SECONDS`.

Reasons, as the reference words them: `ended by the platform: no activity for 1h0m0s` and
`ended by the platform: past the 24h0m0s a session may run`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from agents_site.errors import ApiError
from agents_site.vocabulary import ControlCommand, RunStatus, SessionStatus
from tenancy import stores
from sessions.models import Session
from runs.models import Run
from sessions.control import control_send
from sessions.errors import SessionFinished
from sessions.services import session_update

logger = logging.getLogger(__name__)

#: The actor of the stop events the platform records.
PLATFORM_ACTOR = "platform"


@dataclass
class Reaped:
    """One session the platform ended: its org, id and the reason recorded."""

    org: str
    session_id: str
    reason: str


def go_duration(seconds: int) -> str:
    """Return `seconds` the way the reference prints durations: 3600 → `1h0m0s`, 90 → `1m30s`."""
    hours, rest = divmod(int(seconds), 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def idle_reason(seconds: int) -> str:
    """Return the stop reason of a session idle for `seconds`."""
    return f"ended by the platform: no activity for {go_duration(seconds)}"


def max_life_reason(seconds: int) -> str:
    """Return the stop reason of a session open longer than `seconds`."""
    return f"ended by the platform: past the {go_duration(seconds)} a session may run"


def sessions_reap(*, now: datetime | None = None) -> list[Reaped]:
    """End every org's expired sessions; return what was ended."""
    now = now or timezone.now()
    reaped: list[Reaped] = []
    for slug in stores.existing_org_slugs():
        try:
            with stores.org_context(slug, create=False):
                reaped.extend(reap_org(org=slug, now=now))
        except Exception:
            logger.exception("session reaper failed for org %s", slug)
    return reaped


def reap_org(*, org: str, now: datetime) -> list[Reaped]:
    """End the current org's expired sessions (oldest first). Org context required."""
    max_life = settings.AGENTS_SESSION_MAX_SECONDS
    idle = settings.AGENTS_SESSION_IDLE_SECONDS

    # A session whose run waits for approval has one clock, AGENTS_APPROVAL_TIMEOUT_SECONDS (issue 28).
    waiting = Run.objects.filter(status=RunStatus.WAITING).exclude(session_id="").values("session_id")
    live = Session.objects.filter(status__in=SessionStatus.LIVE).exclude(id__in=waiting)
    expired = list(live.filter(started_at__lt=now - timedelta(seconds=max_life)).order_by("started_at").values_list("id", flat=True))
    quiet = list(
        live.filter(status=SessionStatus.RUNNING, updated_at__lt=now - timedelta(seconds=idle))
        .exclude(id__in=expired)
        .order_by("updated_at")
        .values_list("id", flat=True)
    )
    reaped = []
    for session_id, reason in [(s, max_life_reason(max_life)) for s in expired] + [(s, idle_reason(idle)) for s in quiet]:
        if session_end(session_id=session_id, reason=reason):
            reaped.append(Reaped(org=org, session_id=session_id, reason=reason))
    return reaped


def session_end(*, session_id: str, reason: str) -> bool:
    """Record a platform `stop` with `reason` on a live session and set it `error`.

    Returns False when the session had already finished. A stop that could not be forwarded
    to its executor is still recorded (the event stays), and the session is ended anyway.
    Org context required.
    """
    try:
        control_send(session_id=session_id, command=ControlCommand.STOP, message=reason, actor=PLATFORM_ACTOR)
    except SessionFinished:
        return False
    except ApiError as exc:  # forward failed: the stop is recorded, the session still ends
        logger.warning("reaper stop of %s: %s", session_id, exc.message)
    try:
        session_update(session_id=session_id, status=SessionStatus.ERROR)
    except SessionFinished:
        pass  # its executor ended it first, on the stop
    logger.info("session %s %s", session_id, reason)
    return True
