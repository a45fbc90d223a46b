"""Reads of the tenancy app: an org's members and invitations (default database)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Q
from django.utils import timezone

from agents_site.vocabulary import InvitationState, MemberRole
from tenancy.models import Invitation, Membership, Org


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


def pending_invitation_count(*, org: Org) -> int:
    """Return how many of `org`'s invitations still work."""
    now = timezone.now()
    return Invitation.objects.filter(org=org, accepted_at__isnull=True, revoked_at__isnull=True, expires_at__gt=now).count()


__all__ = ["MemberRow", "member_list", "invitation_list", "pending_invitation_count", "InvitationState"]
