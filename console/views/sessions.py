"""Session pages: the roots list and one session (tree, live events, controls).

The pages are shells: `static/console/sessions.js` and `session.js` read the JSON API with
the session cookie (`GET /v1/agents/sessions…`, the SSE stream) and steer with the control
routes (CSRF token from the page), so the console shows exactly what the API answers.
"""

from __future__ import annotations

import re

from django.http import Http404
from django.shortcuts import render

from console.access import member_required
from sessions.selectors import session_require

_SESSION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")


@member_required
def session_list(request):
    """Show the org's root sessions, newest first, updated live from the stream."""
    return render(request, "console/sessions/list.html", {"nav": "sessions"})


@member_required
def session_detail(request, session_id: str):
    """Show one session: its tree, its events streaming in, and pause/resume/stop/message.

    An id that cannot be a session id, an unknown one and another org's are the same 404 page.
    """
    if not _SESSION_ID.fullmatch(session_id):
        raise Http404("session not found")
    session_require(session_id=session_id)  # SessionNotFound → the 404 page (member_required)
    return render(request, "console/sessions/detail.html", {"session_id": session_id, "nav": "sessions"})


@member_required
def approvals(request):
    """Show the org's approval requests, pending first, with approve / edit-and-approve / deny (issue 28).

    A shell like the session pages: `static/console/approvals.js` reads `GET /v1/agents/approvals`
    and answers through the session's approve/deny routes, so the API decides who may answer.
    """
    return render(request, "console/approvals.html", {"nav": "approvals"})
