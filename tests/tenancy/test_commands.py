"""Management commands: createorg, createapikey, credit, migrate_orgs, bootstrap_demo."""

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from billing.models import LedgerEntry
from billing.selectors import balance_cents
from tenancy import stores
from tenancy.models import ApiKey, Membership, Org
from tenancy.principal import hash_api_key


def run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_createorg_with_admin_and_createapikey_prints_a_working_key_once(db):
    run("createorg", "cmd-org", "--name", "Cmd", "--admin", "boss", "--password", "pw")
    org = Org.objects.get(slug="cmd-org")
    assert org.name == "Cmd" and stores.store_path("cmd-org").exists()
    assert Membership.objects.get(org=org, user__username="boss").is_admin
    key = run("createapikey", "--org", "cmd-org", "--user", "boss").strip()
    assert re.fullmatch(r"ak_[0-9a-f]{48}", key)
    row = ApiKey.objects.get(org=org)
    assert row.key_hash == hash_api_key(key) and key not in row.prefix + row.key_hash
    assert Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/v1/agents").status_code == 200


@pytest.mark.parametrize("slug", ["../x", "A", "x" * 64])
def test_createorg_refuses_bad_slugs(db, slug):
    with pytest.raises(CommandError):
        run("createorg", slug)
    assert not Org.objects.exists()


def test_createapikey_for_a_non_member_fails(db):
    run("createorg", "k-org", "--admin", "boss", "--password", "pw")
    run("createorg", "other-org", "--admin", "stranger", "--password", "pw")
    with pytest.raises(CommandError):
        run("createapikey", "--org", "k-org", "--user", "stranger")
    assert not ApiKey.objects.filter(org__slug="k-org").exists()


def test_credit_adds_a_ledger_row(db):
    run("createorg", "rich")
    assert "balance 250 cents" in run("credit", "rich", "250")
    org = Org.objects.get(slug="rich")
    assert balance_cents(org=org) == 250
    assert list(LedgerEntry.objects.filter(org=org).values_list("kind", "amount_cents")) == [("credit", 250)]
    with pytest.raises(CommandError):
        run("credit", "rich", "-5")
    assert balance_cents(org=org) == 250


def test_migrate_orgs_migrates_every_store(db):
    run("createorg", "mig-one")
    run("createorg", "mig-two")
    out = run("migrate_orgs")
    assert re.search(r"migrated \d+ org store\(s\)", out)


def test_bootstrap_demo_prints_login_and_key_once(db):
    first = run("bootstrap_demo")
    key = re.search(r"API key:\s+(ak_[0-9a-f]{48})", first).group(1)
    assert "admin /" in first
    assert Client(HTTP_AUTHORIZATION=f"Bearer {key}").get("/v1/agents").status_code == 200
    second = run("bootstrap_demo")
    assert "ak_" not in second and ApiKey.objects.count() == 1
