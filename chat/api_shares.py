"""Share-link routes (issue 57; reference §2.7: `…/shares`, `/chat/shared`, `/chat/shares/read`).

Create and list a conversation's or a session's links, list the links the caller manages,
revoke one, and read one anonymously. Thin: parse, call `chat.shares`, shape. Mounted at
`/v1/agents` before the sessions and chat routers. The public HTML page of a link is
`/shared/<token>/` (`console.views.shared`), which reads through the same `share_read`.
"""

from __future__ import annotations

from django.http import HttpResponse
from ninja import Query, Router
from ninja.responses import Status

from agents_site.schemas import ErrorOut
from agents_site.vocabulary import ShareSubject
from chat import shares
from chat.schemas import ShareCreatedOut, ShareIn, ShareListOut, SharedOut
from tenancy.principal import require_org

router = Router(tags=["shares"])

_CREATED = {201: ShareCreatedOut, 403: ErrorOut, 404: ErrorOut}
_LISTED = {200: ShareListOut, 403: ErrorOut, 404: ErrorOut}


def _created(request, kind: str, subject_id: str, payload: ShareIn):
    principal = require_org(request.auth)
    share, token = shares.share_create(principal=principal, kind=kind, subject_id=subject_id, expires_in_days=payload.expiresInDays)
    return Status(201, shares.share_view(share, origin=request.build_absolute_uri("/"), token=token))


def _listed(request, kind: str, subject_id: str):
    principal = require_org(request.auth)
    return {"shares": [shares.share_view(s) for s in shares.share_list(principal=principal, kind=kind, subject_id=subject_id)]}


@router.post("/chat/conversations/{conversation_id}/shares", response=_CREATED, summary="Share a conversation", exclude_none=True)
def share_conversation(request, conversation_id: str, payload: ShareIn):
    """Make a link anyone may read the conversation's turns with → 201 with its `url` and `token` (shown once).

    For the user who started the conversation and the org's admins (403 otherwise); 404 for an
    unknown or another org's conversation; 400 for `expiresInDays` outside 1–365. Revoke it
    with `DELETE /v1/agents/chat/shared/{id}`.
    """
    return _created(request, ShareSubject.CONVERSATION, conversation_id, payload)


@router.get("/chat/conversations/{conversation_id}/shares", response=_LISTED, summary="A conversation's share links",
            exclude_none=True)
def list_conversation_shares(request, conversation_id: str):
    """Return the conversation's share links, newest first, with their `state` (never a token). Same callers as creating one."""
    return _listed(request, ShareSubject.CONVERSATION, conversation_id)


@router.post("/sessions/{id}/shares", response=_CREATED, summary="Share a session", exclude_none=True)
def share_session(request, id: str, payload: ShareIn):
    """Make a link anyone may read the session's turns with (its steering commands and run summaries
    left out) → 201 with its `url` and `token` (shown once). For the user who started the session's
    run and the org's admins (403 otherwise); 404 unknown; 400 for `expiresInDays` outside 1–365."""
    return _created(request, ShareSubject.SESSION, id, payload)


@router.get("/sessions/{id}/shares", response=_LISTED, summary="A session's share links", exclude_none=True)
def list_session_shares(request, id: str):
    """Return the session's share links, newest first, with their `state` (never a token). Same callers as creating one."""
    return _listed(request, ShareSubject.SESSION, id)


@router.get("/chat/shared", response=ShareListOut, summary="The share links you manage", exclude_none=True)
def list_shared(request):
    """Return share links newest first (at most 200): every link of the org for an org admin, the
    links you made otherwise; conversations' and sessions' alike."""
    principal = require_org(request.auth)
    return {"shares": [shares.share_view(s) for s in shares.share_list(principal=principal)]}


@router.delete("/chat/shared/{share_id}", response={204: None, 403: ErrorOut, 404: ErrorOut}, summary="Revoke a share link")
def revoke_shared(request, share_id: str):
    """Revoke the link at once → 204 (again: 204, it stays revoked): its readers get 404 from now on.

    For whoever made it, the user who started what it shows, and the org's admins (403
    otherwise); 404 for an unknown or another org's link.
    """
    shares.share_revoke(principal=require_org(request.auth), share_id=share_id)
    return HttpResponse(status=204)


@router.get("/chat/shares/read", response={200: SharedOut, 404: ErrorOut, 429: ErrorOut}, auth=None,
            summary="Read a shared conversation or session", exclude_none=True)
def read_shared(request, token: str = Query(..., max_length=shares.MAX_TOKEN_CHARS, description="The link's token (`shr_…`).")):
    """Return what a share link shows: `{subject, title, sharedBy, sharedAt, expiresAt, turns}`. No
    credential but the token. An unknown, revoked or expired token is the same 404; more than
    `AGENTS_SHARE_READ_RATE` reads (default 60 a minute) from one address are 429 `rate_limited`
    with `Retry-After`."""
    shares.share_read_throttle(request)
    return shares.share_read(token)
