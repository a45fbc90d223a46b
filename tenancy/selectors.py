"""Reads of the tenancy app: an org's members and invitations (default database)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q
from django.utils import timezone

from agents_site.vocabulary import MemberRole
from tenancy.models import ApiKey, Invitation, Membership, Org, OrgRestore


@dataclass(frozen=True)
class MemberRow:
    """One member of an org as the Members page shows it.

    `active_keys`: the member's unrevoked API keys in this org; `other_orgs`: how many other
    orgs the user belongs to; `password_settable`: an admin of this org may set the user's
    first password (no other org, never signed in; `tenancy.services.member_password_set`).
    """

    user_id: int
    username: str
    role: MemberRole
    joined_at: object
    last_login: object
    active_keys: int
    other_orgs: int

    @property
    def password_settable(self) -> bool:
        return self.other_orgs == 0 and self.last_login is None


def member_list(*, org: Org) -> list[MemberRow]:
    """Return `org`'s members, admins first then by user name, in two queries."""
    memberships = (
        Membership.objects.filter(org=org)
        .select_related("user")
        .annotate(active_keys=Count("user__api_keys", filter=Q(user__api_keys__org=org, user__api_keys__revoked_at__isnull=True), distinct=True))
        .order_by("-is_admin", "user__username")
    )
    rows = list(memberships)
    others = dict(
        Membership.objects.filter(user_id__in=[m.user_id for m in rows]).exclude(org=org).values_list("user_id").annotate(n=Count("id"))
    )
    return [
        MemberRow(user_id=m.user_id, username=m.user.get_username(), role=MemberRole.ADMIN if m.is_admin else MemberRole.MEMBER,
                  joined_at=m.created_at, last_login=m.user.last_login, active_keys=m.active_keys, other_orgs=others.get(m.user_id, 0))
        for m in rows
    ]


def invitation_list(*, org: Org, limit: int = 50) -> list[tuple[Invitation, str]]:
    """Return `org`'s newest invitations with their `InvitationState` now: `[(row, state)]`."""
    now = timezone.now()
    rows = Invitation.objects.filter(org=org).select_related("created_by", "accepted_by").order_by("-created_at", "-id")[:limit]
    return [(row, row.state(now)) for row in rows]


def org_get(*, slug: str) -> Org:
    """Return org `slug` (default database); raise `Org.DoesNotExist` when there is none (the caller's
    principal names an org that exists, so a missing one is a server error, not a 404)."""
    return Org.objects.get(slug=slug)


def api_key_list(*, org: Org) -> list[ApiKey]:
    """Return every API key of `org`, newest first, each with its user (one query)."""
    return list(ApiKey.objects.filter(org=org).select_related("user").order_by("-created_at", "-id"))


def membership_for(*, user_id: int, slug: str) -> Membership | None:
    """Return user `user_id`'s membership of org `slug` with its org, or None when they are not a member."""
    return Membership.objects.filter(user_id=user_id, org__slug=slug).select_related("org").first()


def org_restores(*, slug: str, limit: int) -> list:
    """Return the newest `limit` restores of org `slug` (default database), newest first."""
    return list(OrgRestore.objects.using("default").filter(slug=slug).order_by("-started_at", "-id")[:limit])
