"""The Members console page and the invitation link (issue 34 item 1), through Django's test client."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tenancy.models import ApiKey, Invitation, Membership
from tenancy.services import api_key_create, invitation_create
from tests.console.conftest import signed_in

pytestmark = pytest.mark.django_db

User = get_user_model()


def _link(html: str) -> str:
    return re.search(r'id="invite-link">(http[^<]+)</code>', html).group(1)


def test_only_org_admins_open_the_members_page(admin_client, member):
    page = admin_client.get("/console/members/")
    assert page.status_code == 200 and b'id="members-table"' in page.content
    assert signed_in(member).get("/console/members/").status_code == 403
    assert signed_in(member).post("/console/members/invite/", {"role": "admin"}).status_code == 403
    assert not Invitation.objects.exists()


def test_an_invitation_link_is_shown_once_and_joins_a_signed_in_user_once(admin_client, org_a, make_org):
    answer = admin_client.post("/console/members/invite/", {"role": "member", "note": "for Bo"})
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    link = _link(answer.content.decode())
    path = link.split("testserver", 1)[1]
    assert link.split("/")[-2] not in admin_client.get("/console/members/").content.decode()  # never shown again
    anonymous = Client().get(path)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/console/login/?next=")
    bo = make_org("bo")
    client = signed_in(bo)
    assert org_a.slug.encode() in client.get(path).content
    joined = client.post(path)
    assert joined.status_code == 302 and joined["Location"] == "/console/"
    assert Membership.objects.filter(org=org_a.org, user=bo.user, is_admin=False).exists()
    assert client.session["agents_org"] == org_a.slug
    again = signed_in(make_org("cy")).get(path)
    assert again.status_code == 404 and b"does not work" in again.content


def test_creating_a_user_shows_the_refusal_on_the_form_and_stores_nothing(admin_client, org_a, org_b):
    taken = admin_client.post("/console/members/new/", {"username": org_b.user.username, "password": "a fine long pass 9", "role": "admin"})
    assert taken.status_code == 409
    assert b"send them an invitation link instead" in taken.content and b'id="create-error"' in taken.content
    assert not Membership.objects.filter(org=org_a.org, user=org_b.user).exists()
    weak = admin_client.post("/console/members/new/", {"username": "weakling", "password": "123", "role": "member"})
    assert weak.status_code == 400 and b'value="weakling"' in weak.content
    assert not User.objects.filter(username="weakling").exists()
    made = admin_client.post("/console/members/new/", {"username": "newcomer", "password": "a fine long pass 9", "role": "admin"})
    assert made.status_code == 302
    assert Membership.objects.get(org=org_a.org, user__username="newcomer").is_admin


def test_changing_a_role_and_removing_a_member_from_the_page(admin_client, org_a, make_org):
    bo = make_org("bo2")
    Membership.objects.create(org=org_a.org, user=bo.user)


    api_key_create(org=org_a.org, user=bo.user)
    assert admin_client.post(f"/console/members/{bo.user.pk}/role/", {"role": "admin"}).status_code == 302
    assert Membership.objects.get(org=org_a.org, user=bo.user).is_admin
    last = admin_client.post(f"/console/members/{bo.user.pk}/remove/", follow=True)
    assert b"Member removed" in last.content
    assert not Membership.objects.filter(org=org_a.org, user=bo.user).exists()
    assert ApiKey.objects.get(org=org_a.org, user=bo.user).revoked_at is not None
    assert ApiKey.objects.get(org=bo.org, user=bo.user).revoked_at is None  # their own org's key lives on
    alone = admin_client.post(f"/console/members/{org_a.user.pk}/remove/", follow=True)
    assert b"An org keeps at least one admin" in alone.content
    assert Membership.objects.filter(org=org_a.org, user=org_a.user).exists()


def test_another_orgs_member_is_not_found_here(admin_client, org_b):
    answer = admin_client.post(f"/console/members/{org_b.user.pk}/remove/", follow=True)
    assert b"Member not found." in answer.content
    assert Membership.objects.filter(org=org_b.org, user=org_b.user).exists()
    row, _ = invitation_create(org=org_b.org)
    admin_client.post(f"/console/members/invitations/{row.pk}/revoke/")
    assert Invitation.objects.get(pk=row.pk).revoked_at is None
