"""Share links: anyone holding the link reads a conversation's or a session's turns (issue 57 item 3).

Reference §2.7/§8.1 name the routes (`…/shares`, `/chat/shared`, `/chat/shares/read`); the rules
are this platform's (docs/decisions/1571-share-links.md):

* Who shares: an org admin, or the user who started the thing shared (a conversation's
  `created_by`, a session's `actor`) — `share_permitted`. Anyone else is 403 (`Forbidden`); an
  unknown or another org's subject is 404. The same people list its links and revoke them.
* The link: `/shared/<token>/`; the token `shr_<org>_<secret>` (192 random bits) is shown once,
  in the create answer, and stored only as its SHA-256 (`ShareLink.token_hash`). It lives
  `expiresInDays` days (default `AGENTS_SHARE_DEFAULT_DAYS` 30, at most
  `AGENTS_SHARE_MAX_DAYS` 365; other values 400) and a revocation ends access at once.
* Reading (anonymous): the token's org names the store (opened with `create=False`: a made-up
  org never creates one), the hash finds the row. Unknown, revoked and expired tokens are the
  same 404. A conversation shows its turns (system turns aside), credentials masked by the
  scanner's redaction as everywhere; a session shows its turns as the public build page does
  (`sessions.builds.event_turns`: stored masked, long texts cut) without its `control` and
  `log` events. Both say who shared and when. At most `MAX_SHARED_TURNS` turns.
* Rate: anonymous reads are limited per client address (`AGENTS_SHARE_READ_RATE`, default
  60/min; Django's cache — per process, or Redis with `REDIS_URL`) → 429 `rate_limited`.

Writes (`share_create`, `share_revoke`) and reads (`share_list`, `share_read`) of one
job. Org context required except for `share_read` (it opens the token's org itself).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from ninja.throttling import AnonRateThrottle

from agents_site.errors import ApiError, Forbidden, InvalidRequest, NotFound
from agents_site.ids import mint_id
from agents_site.vocabulary import ChatRole, ErrorCode, EventKind, ShareState, ShareSubject
from agents_site.wire import rfc3339
from chat.models import Conversation, Message, ShareLink
from sessions.builds import event_turns
from sessions.models import Event, Session
from sessions.presenters import payload_value
from sessions.scanner import redact_text
from tenancy import stores

TOKEN_PREFIX = "shr_"
SHARED_PATH = "/shared/{token}/"
MAX_SHARED_TURNS = 1000
MAX_TOKEN_CHARS = 200
_TOKEN = re.compile(r"^shr_(?P<org>[a-z0-9][a-z0-9-]{0,62})_(?P<secret>[A-Za-z0-9_-]{20,128})$")
#: Session events a share never shows: steering commands and bookkeeping (run summaries).
HIDDEN_KINDS = frozenset({EventKind.CONTROL, EventKind.LOG})


class ShareNotFound(NotFound):
    """404: the same answer for an unknown, revoked or expired share token (never told apart)."""

    default_message = "this share link does not exist, was revoked or has expired"


class ShareRateLimited(ApiError):
    """429: too many reads of shared pages from this address; `Retry-After` says when to try again."""

    status = 429
    code = ErrorCode.RATE_LIMITED
    default_message = "too many reads of shared pages from this address; retry later"

    def __init__(self, retry_after: int) -> None:
        super().__init__()
        self.retry_after = max(1, int(retry_after))

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


class _ShareReadThrottle(AnonRateThrottle):
    scope = "share_read"

    def __init__(self) -> None:
        super().__init__(rate=settings.AGENTS_SHARE_READ_RATE)


def share_read_throttle(request) -> None:
    """Count one anonymous read of a shared page by `request`'s client address; raise `ShareRateLimited` (429) past the rate."""
    throttle = _ShareReadThrottle()
    if not throttle.allow_request(request):
        raise ShareRateLimited(int(throttle.wait() or throttle.duration or 60))


def hash_token(token: str) -> str:
    """Return the SHA-256 hex of a share token, as stored."""
    return hashlib.sha256(token.encode()).hexdigest()


def share_state(share: ShareLink, *, now=None) -> str:
    """Return `active`, `revoked` or `expired` (`ShareState`)."""
    if share.revoked_at is not None:
        return ShareState.REVOKED
    if share.expires_at <= (now or timezone.now()):
        return ShareState.EXPIRED
    return ShareState.ACTIVE


@dataclass(frozen=True)
class Subject:
    """What a share shows: its kind, id, title and who started it (an actor)."""

    kind: str
    id: str
    title: str
    started_by: str


def share_subject(*, kind: str, subject_id: str) -> Subject:
    """Return the org's conversation or session `subject_id`; 404 when unknown (or another org's)."""
    subject_id = (subject_id or "").strip()
    if kind == ShareSubject.CONVERSATION:
        row = Conversation.objects.filter(pk=subject_id).only("id", "title", "created_by").first() if subject_id else None
        if row is None:
            raise NotFound("conversation not found")
        return Subject(kind, row.id, row.title, row.created_by)
    row = Session.objects.filter(pk=subject_id).only("id", "title", "agent", "actor").first() if subject_id else None
    if row is None:
        raise NotFound("session not found")
    return Subject(kind, row.id, row.title or row.agent, row.actor)


def share_rule(principal) -> dict:
    """Return whose conversations and sessions `principal` may share: `{"all": bool, "actor": str}` —
    every one of the org's (an org admin), else those `actor` started. The one rule behind
    `share_permitted` and the console's Share controls (`console.context`: a page offers to share
    only what the API would let it); issue 50's permission table takes this rule over."""
    return {"all": bool(principal.is_org_admin), "actor": principal.actor}


def share_permitted(principal, subject: Subject) -> bool:
    """Return True when `principal` may share `subject`, list its links and revoke them (`share_rule`)."""
    rule = share_rule(principal)
    return rule["all"] or (bool(subject.started_by) and rule["actor"] == subject.started_by)


def _check(principal, subject: Subject) -> None:
    if not share_permitted(principal, subject):
        raise Forbidden(f"only the user who started this {subject.kind} or an org admin may share it")


def _days(value) -> int:
    if value is None:
        return settings.AGENTS_SHARE_DEFAULT_DAYS
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= settings.AGENTS_SHARE_MAX_DAYS:
        raise InvalidRequest(f"expiresInDays must be a whole number of days from 1 to {settings.AGENTS_SHARE_MAX_DAYS}")
    return value


def share_create(*, principal, kind: str, subject_id: str, expires_in_days=None) -> tuple[ShareLink, str]:
    """Share `kind` (`ShareSubject`) `subject_id` for `principal`; return `(share, token)` — the token only here.

    Raises `NotFound` (404) for an unknown subject, `Forbidden` (403) for a caller who neither
    started it nor administers the org, `InvalidRequest` (400) for `expires_in_days` outside
    1..`AGENTS_SHARE_MAX_DAYS` (default `AGENTS_SHARE_DEFAULT_DAYS`). Nothing is stored then.
    """
    subject = share_subject(kind=kind, subject_id=subject_id)
    _check(principal, subject)
    days = _days(expires_in_days)
    token = f"{TOKEN_PREFIX}{stores.current_org()}_{secrets.token_urlsafe(24)}"
    now = timezone.now()
    with stores.org_atomic():
        share = ShareLink.objects.create(id=mint_id("shr"), token_hash=hash_token(token), subject=kind, subject_id=subject.id,
                                         created_by=principal.actor[:300], created_at=now, expires_at=now + timedelta(days=days))
    return share, token


def share_list(*, principal, kind: str | None = None, subject_id: str | None = None) -> list[ShareLink]:
    """Return share links newest first: of one subject (`kind`, `subject_id`; 404/403 as `share_create`),
    or — without one — every link of the org for an admin, the caller's own links otherwise. At most 200."""
    shares = ShareLink.objects.all()
    if kind is not None:
        subject = share_subject(kind=kind, subject_id=subject_id or "")
        _check(principal, subject)
        shares = shares.filter(subject=kind, subject_id=subject.id)
    elif not principal.is_org_admin:
        shares = shares.filter(created_by=principal.actor)
    return list(shares.order_by("-created_at", "id")[:200])


def share_revoke(*, principal, share_id: str) -> ShareLink:
    """Revoke share `share_id` at once (a revoked one stays revoked: no change); return it.

    404 unknown; 403 for a caller who neither created it, nor started its subject, nor
    administers the org. Readers get the 404 from the next read on.
    """
    share = ShareLink.objects.filter(pk=(share_id or "").strip()[:64]).first()
    if share is None:
        raise NotFound("share link not found")
    if share.created_by != principal.actor:
        try:
            subject = share_subject(kind=share.subject, subject_id=share.subject_id)
        except NotFound:
            subject = Subject(share.subject, share.subject_id, "", "")
        _check(principal, subject)
    if share.revoked_at is None:
        now = timezone.now()
        with stores.org_atomic():
            ShareLink.objects.filter(pk=share.pk, revoked_at__isnull=True).update(revoked_at=now, revoked_by=principal.actor[:300])
        share.refresh_from_db()
    return share


def share_view(share: ShareLink, *, origin: str = "", token: str | None = None) -> dict:
    """Return the wire view of a share link: `{id, subject, subjectId, state, createdBy, createdAt,
    expiresAt, revokedAt?}`, plus `token` and `url` (`origin` + `/shared/<token>/`) when `token` is given
    (the create answer: the one time they are shown)."""
    view = {"id": share.id, "subject": share.subject, "subjectId": share.subject_id, "state": share_state(share),
            "createdBy": share.created_by, "createdAt": rfc3339(share.created_at), "expiresAt": rfc3339(share.expires_at)}
    if share.revoked_at is not None:
        view["revokedAt"] = rfc3339(share.revoked_at)
    if token is not None:
        view["token"] = token
        view["url"] = origin.rstrip("/") + SHARED_PATH.format(token=token)
    return view


def _sharer(actor: str) -> str:
    """Return who shared, as readers see it: the actor's subject ("alice" of "acme/alice")."""
    return actor.split("/", 1)[1] if "/" in actor else actor


def _conversation_turns(subject_id: str) -> list[dict]:
    rows = (Message.objects.filter(conversation_id=subject_id).exclude(role=ChatRole.SYSTEM)
            .order_by("position").only("role", "content", "finish_reason", "created_at")[:MAX_SHARED_TURNS])
    return [_turn(turn=number, role=row.role, text=redact_text(row.content)[0] if row.content else "",
                  finishReason=row.finish_reason or None, at=rfc3339(row.created_at))
            for number, row in enumerate(rows, start=1)]


def _turn(**given) -> dict:
    """Return one shared turn with every key present (None where it has none: the JSON omits those)."""
    return {"turn": 0, "role": None, "kind": None, "text": "", "tool": None, "commit": None, "subject": None,
            "finishReason": None, "at": "", **given}


def _session_turns(subject_id: str) -> list[dict]:
    events = list(Event.objects.filter(session_id=subject_id).exclude(kind__in=HIDDEN_KINDS).order_by("seq")[:MAX_SHARED_TURNS])
    turns, _, _ = event_turns(events)
    roles = {event.seq: _role(event) for event in events}
    return [_turn(turn=t["turn"], kind=t["kind"], role=roles.get(t["turn"]), text=t.get("body", ""), tool=t.get("tool"),
                  commit=t.get("commit"), subject=t.get("subject"), at=t["at"]) for t in turns]


def _role(event: Event) -> str | None:
    """Return who spoke a `message` event (its payload's `role`, one of `ChatRole`), None otherwise."""
    if event.kind != EventKind.MESSAGE:
        return None
    payload = payload_value(event.payload)
    role = payload.get("role") if isinstance(payload, dict) else None
    return role if role in ChatRole.values else None


def share_read(token: str) -> dict:
    """Return what share link `token` shows, for anyone holding it (no principal; opens the token's org itself).

    `{subject, title, sharedBy, sharedAt, expiresAt, turns}`: a conversation's turns as `{turn,
    role, text, finishReason?, at}`, a session's as `{turn, kind, role?, text, tool?, commit?,
    subject?, at}` (`role` for a message; no `control` or `log` event). Keys without a value are None. Raises `ShareNotFound` (404) for a malformed, unknown,
    revoked or expired token, and for a subject deleted since — one answer for all.
    """
    match = _TOKEN.fullmatch(token or "") if isinstance(token, str) and len(token) <= MAX_TOKEN_CHARS else None
    if match is None:
        raise ShareNotFound()
    try:
        with stores.org_context(match["org"], create=False):
            share = ShareLink.objects.filter(token_hash=hash_token(token)).first()
            if share is None or share_state(share) != ShareState.ACTIVE:
                raise ShareNotFound()
            try:
                subject = share_subject(kind=share.subject, subject_id=share.subject_id)
            except NotFound:
                raise ShareNotFound() from None
            turns = _conversation_turns(subject.id) if subject.kind == ShareSubject.CONVERSATION else _session_turns(subject.id)
    except (stores.StoreMissing, stores.InvalidOrg):
        raise ShareNotFound() from None
    return {"subject": share.subject, "title": subject.title, "sharedBy": _sharer(share.created_by), "sharedAt": rfc3339(share.created_at),
            "expiresAt": rfc3339(share.expires_at), "turns": turns}
