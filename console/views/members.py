"""Members and roles (org admins): invite by a link, create a user, change roles, remove members.

Every rule and message is the service's (`tenancy.services`): the console refuses exactly what
the admin refuses, with the same words. An invitation link and a new user's first password are
shown once, in the answer to the POST that made them (`Cache-Control: no-store`).
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from agents_site.errors import ApiError
from agents_site.vocabulary import MemberRole
from console.access import org_admin_required
from tenancy import selectors, services
from tenancy.models import Org
from tenancy.principal import SESSION_ORG_KEY


def _acting_org(request) -> Org:
    return selectors.org_get(slug=request.principal.org_slug)


def _role_is_admin(value: str | None) -> bool:
    return (value or "").strip() == MemberRole.ADMIN


def _page(request, org: Org, *, invite_link: str | None = None, new_user: dict | None = None, status: int = 200):
    context = {
        "nav": "members",
        "org": org,
        "members": selectors.member_list(org=org),
        "invitations": selectors.invitation_list(org=org),
        "roles": MemberRole.choices,
        "invite_link": invite_link,
        "new_user": new_user or {},
        "me": request.user.pk,
    }
    response = render(request, "console/members.html", context, status=status)
    if invite_link:
        response["Cache-Control"] = "no-store"
    return response


@org_admin_required
def members(request):
    """List the org's members (role, keys, joined, last sign-in) and its invitations."""
    return _page(request, _acting_org(request))


@org_admin_required
@require_POST
def member_invite(request):
    """Make an invitation link (role, note) and show it once."""
    org = _acting_org(request)
    _, token = services.invitation_create(org=org, created_by=request.user, is_admin=_role_is_admin(request.POST.get("role")),
                                          note=request.POST.get("note") or "")
    link = request.build_absolute_uri(reverse("console:invite", kwargs={"token": token}))
    return _page(request, org, invite_link=link)


@org_admin_required
@require_POST
def member_create(request):
    """Create a new user with a first password and make them a member; refusals shown on the form."""
    org = _acting_org(request)
    username = (request.POST.get("username") or "").strip()
    is_admin = _role_is_admin(request.POST.get("role"))
    try:
        services.member_user_create(org=org, username=username, password=request.POST.get("password") or "", is_admin=is_admin)
    except ApiError as exc:
        return _page(request, org, new_user={"username": username, "role": MemberRole.ADMIN if is_admin else MemberRole.MEMBER,
                                             "error": exc.message}, status=exc.status)
    messages.success(request, f"{username} can sign in now, with the password you chose.")
    return redirect("console:members")


def _act(request, do, done: str):
    try:
        do()
    except ApiError as exc:
        messages.error(request, exc.message[:1].upper() + exc.message[1:] + ".")
    else:
        messages.success(request, done)
    return redirect("console:members")


@org_admin_required
@require_POST
def member_role(request, user_id: int):
    """Make a member an admin or a plain member (the org keeps at least one admin)."""
    org = _acting_org(request)
    is_admin = _role_is_admin(request.POST.get("role"))
    return _act(request, lambda: services.membership_role_set(org=org, user_id=user_id, is_admin=is_admin),
                "Role changed.")


@org_admin_required
@require_POST
def member_remove(request, user_id: int):
    """Remove a member: their API keys here are revoked and their open connections closed."""
    org = _acting_org(request)
    return _act(request, lambda: services.member_remove(org=org, user_id=user_id),
                "Member removed: their API keys in this org are revoked and their open connections closed.")


@org_admin_required
@require_POST
def member_password(request, user_id: int):
    """Set the first password of a user this org alone has, who never signed in."""
    org = _acting_org(request)
    password = request.POST.get("password") or ""
    return _act(request, lambda: services.member_password_set(org=org, user_id=user_id, password=password), "Password set.")


@org_admin_required
@require_POST
def invitation_revoke(request, invitation_id: int):
    """Withdraw a pending invitation link (another org's is a 404)."""
    org = _acting_org(request)
    return _act(request, lambda: services.invitation_revoke(org=org, invitation_id=invitation_id), "Invitation withdrawn: the link no longer works.")


@require_http_methods(["GET", "POST"])
def invite_accept(request, token: str):
    """Show an invitation (GET) and accept it (POST) as the signed-in user, then act for that org.

    Not signed in → the login page, back here after. Any signed-in user may open it, with or
    without an org. A link that does not work answers 404 with a page saying so.
    """
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    try:
        invitation = services.invitation_find(token=token)
    except ApiError as exc:
        return render(request, "console/invite.html", {"error": exc.message, "nav": ""}, status=exc.status)
    if request.method == "POST":
        try:
            membership = services.invitation_accept(token=token, user=request.user)
        except ApiError as exc:
            return render(request, "console/invite.html", {"invitation": invitation, "error": exc.message, "nav": ""}, status=exc.status)
        request.session[SESSION_ORG_KEY] = invitation.org.slug
        messages.success(request, f"You joined {invitation.org.name or invitation.org.slug}"
                                  f"{' as an admin' if membership.is_admin else ''}.")
        return redirect("console:dashboard")
    return render(request, "console/invite.html", {"invitation": invitation, "nav": ""})
