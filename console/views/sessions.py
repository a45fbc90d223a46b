"""Session pages: the roots list and one session (tree, live events, controls).

The pages are shells: `static/console/sessions.js` and `session.js` read the JSON API with
the session cookie (`GET /v1/agents/sessions…`, the SSE stream) and steer with the control
routes (CSRF token from the page), so the console shows exactly what the API answers.
"""

from __future__ import annotations

import re

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from agents_site.errors import ApiError
from agents_site.vocabulary import ShareSubject
from console.access import member_required
from console.shares import share_context
from sessions import services
from sessions.selectors import session_get

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
    session = session_get(session_id=session_id)  # SessionNotFound → the 404 page (member_required)
    return render(request, "console/sessions/detail.html", {"session_id": session_id, "session": session, "nav": "sessions",
                                                           **share_context(ShareSubject.SESSION)})


@member_required
@require_POST
def session_publish(request, session_id: str):
    """Publish the session as a public build under `project`, or unpublish it (`action`).

    The same write as `PATCH /v1/agents/sessions/{id}` `{"project", "published"}`
    (`sessions.services.session_update`): a publish with no project, or a project that is not
    a slug, is refused in the API's words and nothing changes. Unpublishing keeps the project.
    Answers a redirect to the session page with the outcome as a message.
    """
    if not _SESSION_ID.fullmatch(session_id):
        raise Http404("session not found")
    session = session_get(session_id=session_id)
    publish = request.POST.get("action") == "publish"
    try:
        if publish:
            session = services.session_update(session_id=session.id, project=request.POST.get("project", ""), published=True)
        else:
            session = services.session_update(session_id=session.id, published=False)
    except ApiError as exc:
        messages.error(request, f"Not published: {exc.message}.")
    else:
        if publish:
            messages.success(request, f"Published as a public build of project {session.project}.")
        else:
            messages.success(request, "Unpublished: the build is no longer public.")
    return redirect("console:session", session_id=session.id)


@member_required
def approvals(request):
    """Show the org's approval requests, pending first, with approve / edit-and-approve / deny (issue 28).

    A shell like the session pages: `static/console/approvals.js` reads `GET /v1/agents/approvals`
    and answers through the session's approve/deny routes, so the API decides who may answer.
    """
    return render(request, "console/approvals.html", {"nav": "approvals"})
