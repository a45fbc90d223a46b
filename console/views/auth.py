"""Sign in, sign out, and choose the org to act for."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpResponseBadRequest, HttpResponseRedirect
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from tenancy.selectors import membership_for
from tenancy.principal import SESSION_ORG_KEY


class LoginView(auth_views.LoginView):
    """The console's login page (Django's auth form, CSRF-protected)."""

    template_name = "console/login.html"
    redirect_authenticated_user = True


class LogoutView(auth_views.LogoutView):
    """Sign out (POST only, CSRF-protected) and land on the login page."""

    next_page = "console:login"


@require_POST
def org_switch(request):
    """Act for the org named by POST `org` (a slug) if the user is a member of it.

    Stores the slug in `request.session["agents_org"]` and redirects to POST `next` (same
    host only) or the dashboard. An org the user is not a member of answers 400 and changes
    nothing, so the switcher can never widen what the user may see.
    """
    if not request.user.is_authenticated:
        return HttpResponseRedirect(reverse("console:login"))
    slug = (request.POST.get("org") or "").strip()
    membership = membership_for(user_id=request.user.pk, slug=slug)
    if membership is None:
        return HttpResponseBadRequest("You are not a member of that org.")
    request.session[SESSION_ORG_KEY] = membership.org.slug
    messages.info(request, f"Now acting for {membership.org.name or membership.org.slug}.")
    target = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        target = reverse("console:dashboard")
    return HttpResponseRedirect(target)
