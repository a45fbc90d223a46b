"""The public page of a share link: `/shared/<token>/` (issue 57), no login.

Reads through `chat.shares.share_read` — the function behind `GET /v1/agents/chat/shares/read` —
so the page shows exactly what the JSON shows: the turns, masked as everywhere, with who shared
them and when. An unknown, revoked or expired token is the site's 404 page; past
`AGENTS_SHARE_READ_RATE` reads from one address, a 429 page with `Retry-After`.
"""

from __future__ import annotations

from django.http import Http404
from django.shortcuts import render

from chat import shares


def shared(request, token: str):
    """Show the conversation or session share link `token` opens, read-only."""
    try:
        shares.share_read_throttle(request)
    except shares.ShareRateLimited as exc:
        response = render(request, "console/shared_limited.html", {"retry_after": exc.retry_after}, status=429)
        response["Retry-After"] = str(exc.retry_after)
        return response
    try:
        page = shares.share_read(token)
    except shares.ShareNotFound as exc:
        raise Http404(exc.message) from exc
    response = render(request, "console/shared.html", {"shared": page})
    response["Cache-Control"] = "no-store"  # a revoked link must not live on in a cache
    response["Referrer-Policy"] = "no-referrer"  # the token is in this page's address
    response["X-Robots-Tag"] = "noindex"
    return response
