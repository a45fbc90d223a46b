"""Org-admin pages: API keys, billing, and the 403 page a plain member gets."""

import re

import pytest

from agents.models import Agent
from billing.services import credit_add, run_debit
from tenancy.models import ApiKey
from tenancy.principal import hash_api_key
from tests.console.conftest import signed_in


@pytest.mark.parametrize(
    "method,path",
    [
        ("get", "/console/keys/"),
        ("post", "/console/keys/"),
        ("get", "/console/billing/"),
        ("get", "/console/backups/"),
        ("get", "/console/agents/new/"),
        ("post", "/console/agents/new/"),
        ("get", "/console/agents/present/edit/"),
        ("post", "/console/agents/present/edit/"),
        ("post", "/console/agents/present/delete/"),
    ],
)
def test_a_plain_member_gets_the_403_page_on_admin_pages_and_nothing_changes(member, make_agent, method, path):
    make_agent(member, "present", instructions="kept")
    client = signed_in(member)
    keys_before = ApiKey.objects.filter(org=member.org).count()
    response = getattr(client, method)(path, {"name": "x", "instructions": "changed", "execution_mode": "one-shot"})
    assert response.status_code == 403
    html = response.content.decode()
    assert "Not allowed" in html and "admins of this org" in html
    assert ApiKey.objects.filter(org=member.org).count() == keys_before
    with member.context():
        assert list(Agent.objects.values_list("name", "instructions")) == [("present", "kept")]


def test_a_member_sees_no_admin_links(member):
    html = signed_in(member).get("/console/").content.decode()
    assert "/console/keys/" not in html and "/console/billing/" not in html


def test_creating_an_api_key_shows_it_once_and_stores_only_its_hash(org_a, admin_client):
    response = admin_client.post("/console/keys/", {"name": "ci"})
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    key = re.search(r'id="new-key" class="secret">(ak_[0-9a-f]{48})<', response.content.decode()).group(1)
    row = ApiKey.objects.get(org=org_a.org, name="ci")
    assert row.key_hash == hash_api_key(key) and row.user == org_a.user and key not in row.prefix + row.key_hash
    api = org_a.client.get("/v1/agents", HTTP_AUTHORIZATION=f"Bearer {key}")
    assert api.status_code == 200
    again = admin_client.get("/console/keys/").content.decode()
    assert key not in again and f"{row.prefix}…" in again
    assert key not in str(dict(admin_client.session))


def test_revoking_an_api_key_stops_it_authenticating(org_a, admin_client):
    from django.test import Client

    admin_client.post("/console/keys/", {"name": "short-lived"})
    row = ApiKey.objects.get(org=org_a.org, name="short-lived")
    response = admin_client.post(f"/console/keys/{row.pk}/revoke/")
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.revoked_at is not None
    # The original key of org_a still works; the revoked row shows as revoked.
    html = admin_client.get("/console/keys/").content.decode()
    assert "revoked" in html.split(f'data-key="{row.prefix}"')[1].split("</tr>")[0]
    assert Client(HTTP_AUTHORIZATION=f"Bearer {org_a.key}").get("/v1/agents").status_code == 200


def test_revoking_another_orgs_key_is_a_404_and_changes_nothing(org_a, org_b, admin_client):
    theirs = ApiKey.objects.get(org=org_b.org)
    response = admin_client.post(f"/console/keys/{theirs.pk}/revoke/")
    assert response.status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_api_keys_page_lists_only_the_acting_orgs_keys(org_a, org_b, admin_client):
    html = admin_client.get("/console/keys/").content.decode()
    mine = ApiKey.objects.get(org=org_a.org)
    theirs = ApiKey.objects.get(org=org_b.org)
    assert f'data-key="{mine.prefix}"' in html
    assert f'data-key="{theirs.prefix}"' not in html


def test_billing_shows_the_balance_and_the_ledger(org_a, admin_client):
    credit_add(org=org_a.org, cents=1050, actor="ops", note="top-up")
    run_debit(org=org_a.org, run_id="run_x1", cents=100, model="test-model", actor=f"{org_a.slug}/someone")
    response = admin_client.get("/console/billing/")
    assert response.status_code == 200
    html = response.content.decode()
    assert '<div class="stat-value" id="balance">$9.50</div>' in html
    assert "top-up" in html and "run_x1" in html and "−$1.00" in html and "$10.50" in html


def test_billing_with_no_money_says_how_to_credit(org_a, admin_client):
    html = admin_client.get("/console/billing/").content.decode()
    assert "No money has moved yet" in html
    assert f"manage.py credit {org_a.slug}" in html


def test_backups_shows_the_orgs_replica_and_its_restores_only(org_a, org_b, admin_client, settings, tmp_path):
    """Issue 35: the console's admin shows what `backup_status` says for the org it acts for."""
    from django.utils import timezone

    from agents_site.vocabulary import RestoreStatus
    from tenancy.backups import litestream
    from tenancy.models import OrgRestore, ReplicaGeneration
    from tests.tenancy.test_backup_status import _replicate_once

    settings.AGENTS_BACKUP_URL = ""
    off = admin_client.get("/console/backups/").content.decode()
    assert 'data-status="off"' in off and "AGENTS_BACKUP_URL is not set" in off and "never been restored" in off

    settings.AGENTS_BACKUP_URL = str(tmp_path / "replica")
    url = litestream.join(litestream.base_url(), "orgs", org_a.slug, "g1")
    ReplicaGeneration.objects.create(slug=org_a.slug, name="g1", replica_url=url, started_at=timezone.now())
    _replicate_once(org_a.slug, url, tmp_path)
    OrgRestore.objects.create(slug=org_a.slug, status=RestoreStatus.FAILED, error="the replica of org cannot be reached")
    OrgRestore.objects.create(slug=org_b.slug, status=RestoreStatus.DONE, error="org b's restore")
    response = admin_client.get("/console/backups/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="backup-state"><span class="badge" data-status="not replicating"' in html
    assert "manage.py replicate is not running" in html and f'<code id="backup-replica">{url}</code>' in html
    snapshot = re.search(r'id="backup-snapshot"><time datetime="([^"]+)"', html)
    assert snapshot and snapshot.group(1).startswith(str(timezone.now().year))  # a last snapshot, shown as a time
    assert 'data-status="failed"' in html and "the replica of org cannot be reached" in html
    assert "org b&#x27;s restore" not in html and "org b's restore" not in html
    assert f"restore_org {org_a.slug} --at" in html and 'href="/console/backups/" class="active"' in html


def test_backups_hides_the_password_of_a_replica_url(org_a, admin_client, settings):
    from django.utils import timezone

    from tenancy.models import ReplicaGeneration

    settings.AGENTS_BACKUP_URL = "sftp://backup:s3cret-pw@127.0.0.1:1/agents"
    ReplicaGeneration.objects.create(slug=org_a.slug, name="g1", replica_url=f"{settings.AGENTS_BACKUP_URL}/orgs/{org_a.slug}/g1",
                                     started_at=timezone.now())
    html = admin_client.get("/console/backups/").content.decode()
    assert "s3cret-pw" not in html and f"sftp://backup:***@127.0.0.1:1/agents/orgs/{org_a.slug}/g1" in html


def test_backups_hides_the_password_in_a_failed_restores_error(org_a, admin_client, settings):
    """A restore whose replica cannot be reached names the replica in its error, stored and shown
    to the org's admins: never with the password (found by review: only the URL line hid it)."""
    from django.utils import timezone

    from tenancy.backups.restore import RestoreError, restore_org
    from tenancy.models import OrgRestore, ReplicaGeneration

    settings.AGENTS_BACKUP_URL = "sftp://backup:s3cret-pw@127.0.0.1:1/agents"
    ReplicaGeneration.objects.create(slug=org_a.slug, name="g1", replica_url=f"{settings.AGENTS_BACKUP_URL}/orgs/{org_a.slug}/g1",
                                     started_at=timezone.now())
    with pytest.raises(RestoreError) as failed:
        restore_org(org_a.slug)
    assert "s3cret-pw" not in str(failed.value) and "backup:***@127.0.0.1" in str(failed.value)
    assert "s3cret-pw" not in OrgRestore.objects.using("default").get(slug=org_a.slug).error
    OrgRestore.objects.using("default").filter(slug=org_a.slug).update(error="an older row: sftp://backup:s3cret-pw@127.0.0.1:1/x")
    html = admin_client.get("/console/backups/").content.decode()
    assert "s3cret-pw" not in html and "sftp://backup:***@127.0.0.1:1/x" in html


def test_hide_passwords_hides_every_url_password_and_nothing_else():
    from tenancy.backups.litestream import hide_passwords

    text = "from s3://key:s%2Fcr%40t@bucket/p and sftp://u:p@h:22/x, file:///data/r and https://h/a:b@c"
    assert hide_passwords(text) == "from s3://key:***@bucket/p and sftp://u:***@h:22/x, file:///data/r and https://h/a:b@c"
