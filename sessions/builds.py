"""The public builds gallery (spec 003: GET /v1/agents/builds, /builds/{org}/{project}; reference §2.5, §7.3).

Public and cross-org: no principal, and the org comes from the path — the one address where
it may. Only published ROOT sessions with a project appear. These reads never create an org
store: they list orgs that already have one (`stores.existing_org_slugs`) and open them with
`org_context(slug, create=False)`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agents_site.wire import rfc3339
from sessions.errors import BuildNotFound
from sessions.models import Event, Session
from sessions.presenters import payload_value
from sessions.provenance import VERIFY_COMMAND
from sessions.selectors import clamp_limit
from tenancy import stores

logger = logging.getLogger(__name__)

MAX_PROJECT = 128
MAX_TURNS = 1000


def _published_roots():
    return Session.objects.filter(published=True, parent_id="").exclude(project="")


def _entry(org: str, session: Session) -> dict:
    return {
        "org": org,
        "project": session.project,
        "session": session.id,
        "title": session.title,
        "agent": session.agent,
        "status": session.status,
        "repo": session.repo,
        "turns": session.last_seq,
        "startedAt": rfc3339(session.started_at),
        "endedAt": rfc3339(session.ended_at),
    }


@dataclass
class _Ranked:
    updated_at: object
    id: str
    entry: dict


def builds_index(*, limit: int | None = None) -> list[dict]:
    """Return every org's published builds, most recently updated first (tie: session id).

    Each entry: `{org, project, session, title, agent, status, repo, turns, startedAt, endedAt}`,
    every field present (empty strings included); `turns` is the session's event count.
    `limit` 1..500, else 100. An org whose store cannot be read is logged and skipped.
    """
    limit = clamp_limit(limit)
    ranked: list[_Ranked] = []
    for slug in stores.existing_org_slugs():
        try:
            with stores.org_context(slug, create=False):
                for session in _published_roots().order_by("-updated_at", "id")[:limit]:
                    ranked.append(_Ranked(session.updated_at, session.id, _entry(slug, session)))
        except stores.StoreMissing:
            continue
        except Exception:
            logger.warning("builds index: the store of %s could not be read", slug, exc_info=True)
    ranked.sort(key=lambda r: r.id)
    ranked.sort(key=lambda r: r.updated_at, reverse=True)
    return [r.entry for r in ranked[:limit]]


def _turn(event: Event, payload) -> dict:
    body = payload if isinstance(payload, dict) else {}
    turn = {"turn": event.seq, "kind": event.kind}
    if event.actor:
        turn["actor"] = event.actor
    turn["body"] = body.get("text") if isinstance(body.get("text"), str) else ""
    for key in ("commit", "subject"):
        if isinstance(body.get(key), str) and body[key]:
            turn[key] = body[key]
    turn["at"] = rfc3339(event.created_at)
    return turn


def build_detail(*, org: str, project: str) -> dict:
    """Return the readable build of `org`/`project`: the session turn by turn, plus `verify`.

    Picks the newest-created published root session with that project. Shape:
    `{org, project, session, title?, agent, status, repo?, model?, startedAt, endedAt?,
    turns: [{turn, kind, actor?, body, commit?, subject?, at}], verify}` — the first 1000
    events oldest first; `body`/`commit`/`subject` from each payload's `text`/`commit`/
    `subject`, `model` from the first payload carrying one. `verify` is the exact `git log`
    that re-derives every commit binding (sessions.provenance). Raises `BuildNotFound` (404)
    for an empty or over-long address, an org with no store (never created here) and an
    unpublished or unknown project.
    """
    org, project = (org or "").strip(), (project or "").strip()
    if not org or not project or len(project) > MAX_PROJECT:
        raise BuildNotFound()
    missing = BuildNotFound(f"no published build for {org}/{project}")
    try:
        with stores.org_context(org, create=False):
            session = _published_roots().filter(project=project).order_by("-created_at", "id").first()
            if session is None:
                raise missing
            events = list(Event.objects.filter(session_id=session.id).order_by("seq")[:MAX_TURNS])
    except (stores.InvalidOrg, stores.StoreMissing):
        raise missing from None
    turns, model = [], ""
    for event in events:
        payload = payload_value(event.payload)
        if not model and isinstance(payload, dict) and isinstance(payload.get("model"), str):
            model = payload["model"]
        turns.append(_turn(event, payload))
    view = {
        "org": org,
        "project": session.project,
        "session": session.id,
        "title": session.title,
        "agent": session.agent,
        "status": session.status,
        "repo": session.repo,
        "model": model,
        "startedAt": rfc3339(session.started_at),
        "endedAt": rfc3339(session.ended_at),
        "turns": turns,
        "verify": VERIFY_COMMAND,
    }
    return {k: v for k, v in view.items() if v != "" or k in ("org", "project", "session", "agent", "status", "startedAt", "verify")}
