"""The console in a real browser: Debian's chromium, driven by Playwright, against a live daphne.

Each test signs in through the login form like a person, clicks through the pages and checks
what the page shows AND what was stored. Screenshots of the main pages are taken on the way
(see the `shoot` fixture for where they go).
"""

import re

import pytest

from agents.models import Agent
from tenancy.models import ApiKey

pytestmark = pytest.mark.django_db(transaction=True)


def test_admin_creates_an_agent_after_a_refused_name(page, make_org, login, shoot):
    org = make_org("br")
    login(page, org)
    assert page.locator(".org-name").inner_text() == org.slug
    page.click(".sidebar >> text=Platform agents")
    assert "No platform agents yet" in page.inner_text("main")
    shoot(page, "agents-empty")
    page.click("text=create one")
    page.fill("#id_name", "bad name!")
    page.click("button:has-text('Create agent')")
    assert page.inner_text("#form-error li[data-field=name]") == "name must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
    assert page.inner_text("#id_name-error") == "name must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"
    with org.context():
        assert Agent.objects.count() == 0
    page.fill("#id_name", "helper")
    page.fill("#id_instructions", "Answer in one sentence.")
    page.fill("#id_tools", "calculator")
    shoot(page, "agent-form")
    page.click("button:has-text('Create agent')")
    page.wait_for_url("**/console/agents/helper/")
    assert "Agent helper created." in page.inner_text(".flash")
    with org.context():
        agent = Agent.objects.get(name="helper")
        assert (agent.instructions, agent.tools, agent.model) == ("Answer in one sentence.", ["calculator"], "test-model")
    page.click(".sidebar >> text=Platform agents")
    assert page.inner_text("tr[data-agent=helper] .run-count") == "0"
    shoot(page, "agents")


def test_admin_creates_and_revokes_an_api_key(page, make_org, login, shoot):
    org = make_org("bk")
    login(page, org)
    page.click(".sidebar >> text=API keys")
    page.fill("#id_key_name", "ci")
    page.click("button:has-text('Create API key')")
    key = page.inner_text("#new-key").strip()
    assert re.fullmatch(r"ak_[0-9a-f]{48}", key)
    row = ApiKey.objects.get(org=org.org, name="ci")
    assert row.revoked_at is None and key.startswith(row.prefix)
    shoot(page, "api-keys")
    page.goto("/console/keys/")  # shown once: gone on the next visit
    assert key not in page.content()
    page.on("dialog", lambda dialog: dialog.accept())
    page.click(f"tr[data-key='{row.prefix}'] button:has-text('Revoke')")
    page.wait_for_selector(f"tr[data-key='{row.prefix}'] .key-state:has-text('revoked')")
    row.refresh_from_db()
    assert row.revoked_at is not None


def test_plain_member_sees_403_on_an_admin_page(page, make_org, login, shoot):
    org = make_org("bm", admin=False)
    login(page, org)
    assert page.locator("a:has-text('API keys')").count() == 0
    response = page.goto("/console/keys/")
    assert response.status == 403
    assert "Not allowed" in page.inner_text("main")
    assert "as a member" in page.inner_text("main")
    shoot(page, "forbidden")


def test_user_in_two_orgs_switches_org(page, make_org, make_agent, login, shoot):
    first = make_org("bs", username="switcher")
    second = make_org("bt", username="switcher")
    make_agent(second, "second-org-agent")
    login(page, first)
    page.click(".sidebar >> text=Platform agents")
    assert "second-org-agent" not in page.inner_text("main")
    page.select_option("#org-switch", second.slug)
    page.wait_for_selector("tr[data-agent='second-org-agent']")
    assert f"Now acting for {second.slug}" in page.inner_text(".flash")
    assert page.url.endswith("/console/agents/")


def test_billing_page_shows_balance(page, make_org, login, shoot):
    from billing.services import credit_add

    org = make_org("bb")
    credit_add(org=org.org, cents=10_000, actor="ops", note="welcome credit")
    login(page, org)
    page.click(".sidebar >> text=Billing")
    assert page.inner_text("#balance") == "$100.00"
    assert "welcome credit" in page.inner_text("#ledger-table")
    shoot(page, "billing")


def test_login_page(page, shoot):
    page.goto("/console/")
    page.wait_for_url("**/console/login/?next=/console/")
    shoot(page, "login")
    assert page.locator("input[name=csrfmiddlewaretoken]").count() == 1


def test_backups_page_shows_the_orgs_backup_and_restores(page, make_org, login, shoot):
    """Issue 35: an org admin reaches the org's backup from the sidebar (this live server runs
    without AGENTS_BACKUP_URL: the state says so) and sees the org's restores in local time."""
    from agents_site.vocabulary import RestoreStatus
    from tenancy.models import OrgRestore

    org = make_org("bk")
    OrgRestore.objects.create(slug=org.slug, status=RestoreStatus.FAILED, error="the replica of org cannot be reached at s3://x")
    login(page, org)
    page.click(".sidebar >> text=Backups")
    page.wait_for_url("**/console/backups/")
    assert page.inner_text("#backup-state") == "off"
    assert page.locator("#backup-state .badge").evaluate("b => getComputedStyle(b).getPropertyValue('--badge').trim()") == "#6b7280"
    assert "AGENTS_BACKUP_URL is not set" in page.inner_text("#backup-detail")
    row = page.locator("#restore-table tbody tr")
    assert row.count() == 1 and "failed" in row.inner_text() and "cannot be reached at s3://x" in row.inner_text()
    assert row.locator("time[data-localized]").count() == 1  # its start, rewritten by console.js in the viewer's local time
    shoot(page, "backups")
