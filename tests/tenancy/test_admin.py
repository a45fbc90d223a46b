"""The org's Django admin for members, invitations and API keys (issue 34 item 1): the console's rules, its words."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tenancy.models import ApiKey, Invitation, Membership
from tenancy.services import api_key_create, membership_set

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(org_a) -> Client:
    client = Client()
    client.force_login(org_a.user)
    return client


def test_an_org_admin_sees_and_changes_only_their_orgs_members(admin, org_a, org_b):
    bo = membership_set(org=org_a.org, username="bo-admin-test", is_admin=False)
    page = admin.get("/admin/tenancy/membership/")
    assert page.status_code == 200
    assert b"bo-admin-test" in page.content and org_b.user.username.encode() not in page.content
    assert admin.get("/admin/tenancy/membership/add/").status_code == 403  # users join by invitation
    theirs = Membership.objects.get(org=org_b.org)
    assert admin.get(f"/admin/tenancy/membership/{theirs.pk}/change/").status_code == 302  # not found → the index
    answer = admin.post(f"/admin/tenancy/membership/{bo.pk}/change/", {"is_admin": "on"})
    assert answer.status_code == 302
    assert Membership.objects.get(pk=bo.pk).is_admin


def test_the_admin_refuses_to_leave_an_org_without_an_admin(admin, org_a):
    mine = Membership.objects.get(org=org_a.org, user=org_a.user)
    answer = admin.post(f"/admin/tenancy/membership/{mine.pk}/change/", {})
    assert answer.status_code == 200
    assert "An org keeps at least one admin: make another member an admin first." in answer.content.decode()
    assert Membership.objects.get(pk=mine.pk).is_admin


def test_removing_a_member_in_the_admin_revokes_their_keys_and_keeps_the_user(admin, org_a):
    bo = membership_set(org=org_a.org, username="bo-leaves", is_admin=False)
    api_key_create(org=org_a.org, user=bo.user)
    answer = admin.post(f"/admin/tenancy/membership/{bo.pk}/delete/", {"post": "yes"})
    assert answer.status_code == 302
    assert not Membership.objects.filter(pk=bo.pk).exists()
    assert ApiKey.objects.get(user=bo.user).revoked_at is not None
    assert bo.user.__class__.objects.filter(pk=bo.user.pk).exists()


def test_an_invitation_made_in_the_admin_shows_its_link_once_and_can_be_withdrawn(admin, org_a, org_b):
    answer = admin.post("/admin/tenancy/invitation/add/", {"is_admin": "on", "note": "for Cy"}, follow=True)
    assert answer.status_code == 200
    link = re.search(r"(http://testserver/console/invite/inv_[A-Za-z0-9_-]+/)", answer.content.decode()).group(1)
    row = Invitation.objects.get()
    assert row.org == org_a.org and row.is_admin and row.note == "for Cy" and row.created_by == org_a.user
    assert link.split("/")[-2] not in admin.get(f"/admin/tenancy/invitation/{row.pk}/change/").content.decode()
    theirs = Invitation.objects.create(org=org_b.org, token_hash="0" * 64, expires_at=row.expires_at)
    admin.post("/admin/tenancy/invitation/", {"action": "withdraw", "_selected_action": [row.pk, theirs.pk]})
    assert Invitation.objects.get(pk=row.pk).revoked_at is not None
    assert Invitation.objects.get(pk=theirs.pk).revoked_at is None  # another org's is out of reach


def test_an_org_admin_revokes_keys_in_the_admin(admin, org_a, org_b):
    mine = ApiKey.objects.get(org=org_a.org)
    theirs = ApiKey.objects.get(org=org_b.org)
    admin.post("/admin/tenancy/apikey/", {"action": "revoke", "_selected_action": [mine.pk, theirs.pk]})
    assert ApiKey.objects.get(pk=mine.pk).revoked_at is not None
    assert ApiKey.objects.get(pk=theirs.pk).revoked_at is None


def test_admin_labels_read_as_english(admin):
    index = admin.get("/admin/").content.decode()
    assert "Agent_Sessions" not in index and "AGENT_SESSIONS" not in index and ">Sessions<" in index
    assert "Api keys" not in index and "API keys" in index
    assert "Org, members and keys" in index


def test_the_mcp_name_help_keeps_its_placeholders(admin):
    page = admin.get("/admin/agents/mcpserver/add/")
    if page.status_code == 403:
        from agents.models import McpServer

        help_text = str(McpServer._meta.get_field("name").help_text)
    else:
        help_text = page.content.decode()
    assert "mcp__‹this name›__‹tool›" in help_text and "mcp____" not in help_text


def test_the_users_page_tells_an_org_admin_where_members_are_managed(admin, org_a):
    page = admin.get("/admin/auth/user/")
    assert page.status_code == 403
    text = page.content.decode()
    assert "Ask an admin of this org" not in text
    assert "for the operators of this site" in text and 'href="/console/members/"' in text
