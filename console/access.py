"""Who may open a console page: signed-in org members, and org admins for admin pages.

- Not signed in → redirect to the login page (`?next=` back here).
- Signed in with no org → the "no org yet" page (200), which says what to do next.
- An org-admin page opened by a plain member → `PermissionDenied`, rendered as the 403 page.
- A `NotFound` raised by a selector (missing, or another org's) → the 404 page.

The org acted for is the one `tenancy.principal` resolved from `request.session["agents_org"]`
(`SESSION_ORG_KEY`); the middleware already made it current, so org-store reads work in views.
"""

from __future__ import annotations

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import render

from agents_site.errors import NotFound
from agents_site.vocabulary import PrincipalVia


def _session_principal(request):
    principal = getattr(request, "principal", None)
    if principal is None or principal.via != PrincipalVia.SESSION:
        return None
    return principal


def member_required(view):
    """Decorate a console view: require a session login acting for an org."""

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        principal = _session_principal(request)
        if principal is None:
            return redirect_to_login(request.get_full_path())
        if not principal.org_slug:
            return render(request, "console/no_org.html", status=200)
        try:
            return view(request, *args, **kwargs)
        except NotFound as exc:
            # Another org's object and a missing one are the same 404 page.
            raise Http404(exc.message) from exc

    return wrapper


def org_admin_required(view):
    """Decorate a console view: require an org admin of the acting org, else the 403 page."""

    @wraps(view)
    @member_required
    def wrapper(request, *args, **kwargs):
        if not request.principal.is_org_admin:
            raise PermissionDenied("This page is for the admins of this org.")
        return view(request, *args, **kwargs)

    return wrapper
