"""The public builds gallery (spec 003: GET /v1/agents/builds, /builds/{org}/{project}; reference §2.5, §7.3).

Public and cross-org: no principal, and the org comes from the path — the one address where
it may. Only published ROOT sessions with a project appear. These reads never create an org
store: they list orgs that already have one (`stores.existing_org_slugs`) and open them with
`org_context(slug, create=False)`.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass

from agents_site.vocabulary import ControlCommand, EventKind
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
        "url": f"/builds/{org}/{session.project}/{session.id}/",
    }


@dataclass
class _Ranked:
    updated_at: object
    id: str
    entry: dict


def builds_index(*, limit: int | None = None) -> list[dict]:
    """Return every org's published builds, most recently updated first (tie: session id).

    Each entry: `{org, project, session, title, agent, status, repo, turns, startedAt, endedAt, url}`
    (`url`: the build's own page, so two builds of one project are both reachable),
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


SHOWN_TEXT = 4000
SHOWN_PATCH = 16 * 1024
FINAL_FIELDS = ("branch", "commitSha", "diffstat", "changed", "pushed")


def _cut(text: object, limit: int) -> str:
    text = text if isinstance(text, str) else ""
    return text if len(text) <= limit else text[:limit] + "\n…[cut]"


def _arguments_text(arguments: object) -> str:
    if isinstance(arguments, str):
        return arguments
    try:
        return json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError):
        return ""


def _turn(event: Event, payload) -> dict:
    """Return one event as a build turn (payloads are stored masked; long texts are cut here)."""
    body = payload if isinstance(payload, dict) else {}
    turn = {"turn": event.seq, "kind": event.kind}
    if event.actor:
        turn["actor"] = event.actor
    text = body.get("text") if isinstance(body.get("text"), str) else ""
    if event.kind == EventKind.TOOL_CALL and isinstance(body.get("name"), str) and body["name"]:
        arguments = _cut(_arguments_text(body.get("arguments", {})), SHOWN_TEXT)
        turn["tool"] = {"name": body["name"], "arguments": arguments, "result": _cut(body.get("result"), SHOWN_TEXT),
                        "error": body.get("error") is True}
        if not text:
            text = f"{body['name']} {arguments}".strip()
    if event.kind == EventKind.APPROVAL and isinstance(body.get("tool"), str):
        # The request as the run asked it (arguments masked when stored); never who may answer.
        text = f"asked to approve {body['tool']} {_arguments_text(body.get('arguments', {}))}".strip()
    if event.kind == EventKind.CONTROL and body.get("command") in ControlCommand.ANSWERS:
        verb = "approved" if body.get("command") == ControlCommand.APPROVE else "denied"
        edited = " with edited arguments " + _arguments_text(body["arguments"]) if "arguments" in body else ""
        reason = f": {body['message']}" if isinstance(body.get("message"), str) and body["message"] else ""
        text = f"{verb} {body.get('toolCallId') or ''}{edited}{reason}"
    turn["body"] = _cut(text, SHOWN_TEXT) if event.kind != EventKind.MESSAGE else text
    for key in ("commit", "subject"):
        if isinstance(body.get(key), str) and body[key]:
            turn[key] = body[key]
    if event.kind == EventKind.COMMIT:
        if isinstance(body.get("diffstat"), str):
            turn["diffstat"] = body["diffstat"]
        if isinstance(body.get("patch"), str) and body["patch"]:
            turn["patch"] = _cut(body["patch"], SHOWN_PATCH)
        if isinstance(body.get("turn"), int) and not isinstance(body.get("turn"), bool):
            turn["forTurn"] = body["turn"]
    turn["at"] = rfc3339(event.created_at)
    return turn


def event_turns(events: list[Event]) -> tuple[list[dict], str, dict]:
    """Return `(turns, model, final)` of a session's events (oldest first), as a build shows them.

    `turns` as in `build_detail`; `model` from the first payload naming one; `final` the run's
    closing facts (`summary`, `branch`, `head`, `diffstat`, `changed`, `pushed`; {} before the
    run ends). Also used by the console's coding page, which updates while the run works.
    """
    turns, model, decoded = [], "", []
    for event in events:
        payload = payload_value(event.payload)
        decoded.append((event, payload))
        if not model and isinstance(payload, dict) and isinstance(payload.get("model"), str):
            model = payload["model"]
        turns.append(_turn(event, payload))
    return turns, model, _final(decoded)


def build_url(org: str, project: str, session_id: str) -> str:
    """Return the page of one build: `/builds/{org}/{project}/{sessionId}/`."""
    return f"/builds/{org}/{project}/{session_id}/"


#: Where the one-file verifier (`toolkit/verify_build.py`, byte for byte) is served, and the name a recipe saves it as.
VERIFIER_PATH = "/builds/verify.py"
VERIFIER_FILE = "agents-verify.py"


def verify_recipe(*, session_id: str, branch: str, repo: str, page: str, origin: str = "") -> str:
    """Return the shell recipe that re-derives a coding build's bindings in a fresh clone of its repo.

    It fetches the run's branch (a plain clone may not have it), lists each commit carrying the
    session's trailer as `<sha> <session> <turn>` (oldest first), downloads the verifier (one
    Python file, standard library only: `VERIFIER_PATH`) and runs it on the page's absolute
    address (`origin` + `page`, e.g. `https://host/builds/…/`); it compares the commits with the
    published log (exit 0 when they agree, 1 on a mismatch, 2 when a side cannot be read).
    Every line runs as pasted in a clone of any repository, the platform not installed;
    without an `origin` the addresses start with `"$AGENTS_SERVER"`.
    """
    base = origin.rstrip("/")
    address = shlex.quote(base + page) if origin else f'"$AGENTS_SERVER"{shlex.quote(page)}'
    download = shlex.quote(base + VERIFIER_PATH) if origin else f'"$AGENTS_SERVER"{VERIFIER_PATH}'
    fmt = "%H %(trailers:key=Agents-Session,valueonly,separator=%x20) %(trailers:key=Agents-Turn,valueonly,separator=%x20)"
    return "\n".join([
        f"# in a fresh clone of {repo or 'the repository'} (git clone <its URL> && cd <it>):",
        f"git fetch origin +refs/heads/{branch}:refs/remotes/origin/{branch}",
        f"git log --reverse --grep='^Agents-Session: {session_id}$' --format='{fmt}' origin/{branch}",
        f"curl -fsS -o {VERIFIER_FILE} {download}",
        f"python3 {VERIFIER_FILE} {address} --repo .",
    ])


def _final(events: list[tuple[Event, object]]) -> dict:
    """Return the run's closing facts from its last summary `log` event: `{summary?, branch?, head?, diffstat?, changed?, pushed?}`."""
    for event, payload in reversed(events):
        if event.kind == EventKind.LOG and isinstance(payload, dict) and any(k in payload for k in FINAL_FIELDS):
            final = {}
            if isinstance(payload.get("summary"), str) and payload["summary"]:
                final["summary"] = payload["summary"]
            if isinstance(payload.get("branch"), str) and payload["branch"]:
                final["branch"] = payload["branch"]
            if isinstance(payload.get("commitSha"), str) and payload["commitSha"]:
                final["head"] = payload["commitSha"]
            if isinstance(payload.get("diffstat"), str) and payload["diffstat"]:
                final["diffstat"] = payload["diffstat"]
            for key in ("changed", "pushed"):
                if isinstance(payload.get(key), bool):
                    final[key] = payload[key]
            return final
    return {}


def _summary_of(session: Session) -> dict:
    return {"session": session.id, "title": session.title, "status": session.status,
            "startedAt": rfc3339(session.started_at), "endedAt": rfc3339(session.ended_at)}


def build_detail(*, org: str, project: str, session_id: str | None = None, origin: str = "") -> dict:
    """Return the readable build of `org`/`project`: the session turn by turn, plus `verify`.

    Without `session_id` the newest-created published root session with that project (spec
    003), with it that one build (`/builds/{org}/{project}/{sessionId}`). Shape: `{org, project,
    session, url, title?, agent, status, repo?, model?, summary?, branch?, head?, diffstat?,
    changed?, pushed?, startedAt, endedAt?, turns: [{turn, kind, actor?, body, tool?, commit?,
    subject?, diffstat?, patch?, forTurn?, at}], builds: [{session, title, status, startedAt,
    endedAt, url}], verify}` — the first 1000 events oldest first; a tool call's `tool` is `{name,
    arguments, result, error}` (masked as stored, cut to 4000 characters); a commit's
    `forTurn` is the seq of the turn that made it (its `Agents-Turn`); `builds` lists every
    published build of the project, newest first. `verify` is, for a coding build (one with a
    branch), the recipe that re-derives its bindings in a fresh clone (`verify_recipe`), else
    the `git log` of sessions.provenance; `origin` (`https://host`, the address the page was
    asked at) makes its download and `verify` lines absolute. Raises `BuildNotFound` (404) for an empty or
    over-long address, an org with no store (never created here) and an unpublished or
    unknown project or session.
    """
    org, project = (org or "").strip(), (project or "").strip()
    if not org or not project or len(project) > MAX_PROJECT or (session_id is not None and not (session_id or "").strip()):
        raise BuildNotFound()
    missing = BuildNotFound(f"no published build for {org}/{project}" + (f"/{session_id}" if session_id else ""))
    try:
        with stores.org_context(org, create=False):
            published = _published_roots().filter(project=project)
            chosen = published.filter(pk=session_id.strip()) if session_id else published
            session = chosen.order_by("-created_at", "id").first()
            if session is None:
                raise missing
            siblings = [_summary_of(s) for s in published.order_by("-created_at", "id")[:MAX_TURNS]]
            events = list(Event.objects.filter(session_id=session.id).order_by("seq")[:MAX_TURNS])
    except (stores.InvalidOrg, stores.StoreMissing):
        raise missing from None
    turns, model, final = event_turns(events)
    page = build_url(org, session.project, session.id)
    verify = (verify_recipe(session_id=session.id, branch=final["branch"], repo=session.repo, page=page, origin=origin)
              if final.get("branch") else VERIFY_COMMAND)
    view = {
        "org": org,
        "project": session.project,
        "session": session.id,
        "url": page,
        "title": session.title,
        "agent": session.agent,
        "status": session.status,
        "repo": session.repo,
        "model": model,
        **final,
        "startedAt": rfc3339(session.started_at),
        "endedAt": rfc3339(session.ended_at),
        "turns": turns,
        "builds": [{**b, "url": build_url(org, session.project, b["session"])} for b in siblings],
        "verify": verify,
    }
    return {k: v for k, v in view.items() if v != "" or k in ("org", "project", "session", "agent", "status", "startedAt", "verify")}
