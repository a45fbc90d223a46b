"""Members, roles and invitations (tenancy.services; issue 34 item 1): what is allowed, what is stored."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from agents_site.errors import Conflict, InvalidRequest, NotFound
from tenancy import selectors, services
from tenancy.models import ApiKey, Invitation, Membership

pytestmark = pytest.mark.django_db

User = get_user_model()


def test_an_invitation_token_is_shown_once_stored_hashed_and_expires(org_a, settings):
    settings.AGENTS_INVITE_TTL_HOURS = 5
    row, token = services.invitation_create(org=org_a.org, created_by=org_a.user, note="  for Bo  ")
    assert token.startswith("inv_") and len(token) == 47
    assert token not in row.token_hash and len(row.token_hash) == 64
    assert row.note == "for Bo" and not row.is_admin
    assert timedelta(hours=4, minutes=59) < row.expires_at - timezone.now() <= timedelta(hours=5)


def test_an_invitation_works_once_and_joins_with_its_role(org_a, make_org):
    _, token = services.invitation_create(org=org_a.org, is_admin=True)
    first = make_org("x").user
    second = make_org("y").user
    membership = services.invitation_accept(token=token, user=first)
    assert membership.org == org_a.org and membership.is_admin
    row = Invitation.objects.get()
    assert row.accepted_by == first and row.accepted_at is not None
    with pytest.raises(NotFound):
        services.invitation_accept(token=token, user=second)
    assert not Membership.objects.filter(org=org_a.org, user=second).exists()


def test_an_expired_withdrawn_or_unknown_link_lets_nobody_in(org_a, make_org):
    user = make_org("z").user
    expired, expired_token = services.invitation_create(org=org_a.org)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    withdrawn, withdrawn_token = services.invitation_create(org=org_a.org)
    services.invitation_revoke(org=org_a.org, invitation_id=withdrawn.pk)
    for token in (expired_token, withdrawn_token, "inv_nope", "ak_" + "0" * 48, ""):
        with pytest.raises(NotFound):
            services.invitation_accept(token=token, user=user)
    assert not Membership.objects.filter(org=org_a.org, user=user).exists()


def test_a_member_accepting_again_is_refused_and_the_link_stays_usable(org_a, make_org):
    _, token = services.invitation_create(org=org_a.org)
    with pytest.raises(Conflict):
        services.invitation_accept(token=token, user=org_a.user)
    assert services.invitation_accept(token=token, user=make_org("w").user).org == org_a.org


def test_another_orgs_invitation_cannot_be_withdrawn(org_a, org_b):
    row, _ = services.invitation_create(org=org_b.org)
    with pytest.raises(NotFound):
        services.invitation_revoke(org=org_a.org, invitation_id=row.pk)
    assert Invitation.objects.get(pk=row.pk).revoked_at is None


def test_an_admin_creates_only_a_new_user_with_a_checked_first_password(org_a, org_b):
    membership = services.member_user_create(org=org_a.org, username="newbie", password="a long enough pass 9", is_admin=False)
    assert membership.user.check_password("a long enough pass 9") and not membership.is_admin
    with pytest.raises(Conflict):  # users are global: an existing one joins by invitation only
        services.member_user_create(org=org_a.org, username=org_b.user.username, password="another long pass 9")
    with pytest.raises(Conflict):
        services.member_user_create(org=org_a.org, username="NEWBIE", password="another long pass 9")
    with pytest.raises(InvalidRequest):
        services.member_user_create(org=org_a.org, username="bad name!", password="another long pass 9")
    with pytest.raises(InvalidRequest):
        services.member_user_create(org=org_a.org, username="", password="another long pass 9")
    assert not User.objects.filter(username__in=["bad name!", ""]).exists()
    assert not Membership.objects.filter(org=org_a.org, user=org_b.user).exists()


def test_a_password_the_site_refuses_creates_nothing(org_a, settings):
    settings.AUTH_PASSWORD_VALIDATORS = [{"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 12}}]
    with pytest.raises(InvalidRequest, match="at least 12 characters"):
        services.member_user_create(org=org_a.org, username="shorty", password="short")
    assert not User.objects.filter(username="shorty").exists()


def test_a_first_password_is_set_only_for_a_user_of_this_org_alone_who_never_signed_in(org_a, make_org):
    fresh = services.member_user_create(org=org_a.org, username="fresh", password="first long pass 9").user
    services.member_password_set(org=org_a.org, user_id=fresh.pk, password="second long pass 9")
    assert User.objects.get(pk=fresh.pk).check_password("second long pass 9")
    shared = make_org("sh")
    services.invitation_accept(token=services.invitation_create(org=org_a.org)[1], user=shared.user)
    with pytest.raises(Conflict):
        services.member_password_set(org=org_a.org, user_id=shared.user.pk, password="hijack long pass 9")
    User.objects.filter(pk=fresh.pk).update(last_login=timezone.now())
    with pytest.raises(Conflict):
        services.member_password_set(org=org_a.org, user_id=fresh.pk, password="third long pass 9")
    assert User.objects.get(pk=fresh.pk).check_password("second long pass 9")
    with pytest.raises(NotFound):
        services.member_password_set(org=org_a.org, user_id=make_org("o").user.pk, password="other long pass 9")


def test_roles_change_but_an_org_keeps_one_admin(org_a):
    other = services.member_user_create(org=org_a.org, username="second", password="second long pass 9").user
    with pytest.raises(Conflict):
        services.membership_role_set(org=org_a.org, user_id=org_a.user.pk, is_admin=False)
    with pytest.raises(Conflict):
        services.member_remove(org=org_a.org, user_id=org_a.user.pk)
    services.membership_role_set(org=org_a.org, user_id=other.pk, is_admin=True)
    services.membership_role_set(org=org_a.org, user_id=org_a.user.pk, is_admin=False)
    assert list(Membership.objects.filter(org=org_a.org, is_admin=True).values_list("user_id", flat=True)) == [other.pk]
    with pytest.raises(NotFound):
        services.membership_role_set(org=org_a.org, user_id=999999, is_admin=True)


def test_removing_a_member_revokes_their_keys_and_keeps_the_user(org_a):
    member = services.member_user_create(org=org_a.org, username="leaver", password="leaver long pass 9").user
    services.api_key_create(org=org_a.org, user=member)
    assert services.member_remove(org=org_a.org, user_id=member.pk) == 1
    assert ApiKey.objects.get(user=member).revoked_at is not None
    assert User.objects.get(pk=member.pk).check_password("leaver long pass 9")


def test_the_member_list_says_role_keys_and_other_orgs_in_two_queries(org_a, make_org, django_assert_num_queries):
    shared = make_org("sl")
    services.invitation_accept(token=services.invitation_create(org=org_a.org)[1], user=shared.user)
    services.api_key_create(org=org_a.org, user=shared.user)
    with django_assert_num_queries(2):
        rows = selectors.member_list(org=org_a.org)
    by_name = {row.username: row for row in rows}
    assert by_name[org_a.user.username].role == "admin" and by_name[org_a.user.username].active_keys == 1
    assert by_name[shared.user.username].role == "member" and by_name[shared.user.username].other_orgs == 1
    assert not by_name[shared.user.username].password_settable
    assert [row.role for row in rows] == ["admin", "member"]


@pytest.mark.parametrize("password", ["", "short", "12345678901234", "password123"])
def test_the_sites_password_rules_refuse_empty_short_numeric_and_common_passwords(org_a, password):
    with pytest.raises(InvalidRequest):
        services.member_user_create(org=org_a.org, username="ruled", password=password)
    assert not User.objects.filter(username="ruled").exists()
