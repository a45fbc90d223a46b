"""The identity console in Chromium (Playwright) against a live daphne: create (token shown
once), edit, rotate, delete with the cascade preview, and the inbox's security alert."""

import pytest

from identity.models import IdentityProfile, InboxItem
from tests.identity.conftest import create_agent, post

pytestmark = pytest.mark.django_db(transaction=True)


def test_user_manages_identity_agents_and_sees_the_security_alert(page, make_org, login, shoot):
    from django.test import Client

    from tenancy.services import api_key_create, membership_set

    org = make_org("bi")
    login(page, org)
    page.click(".sidebar >> text=Identity agents")
    page.fill("#identity-create input[name=display_name]", "X")
    page.click("#identity-create button[type=submit]")
    page.wait_for_selector("#identity-error:not([hidden])")
    assert "display_name" in page.inner_text("#identity-error")
    page.fill("#identity-create input[name=display_name]", "Browser Bot")
    page.fill("#identity-create input[name=custom_id]", "browser_bot")
    page.click("#identity-create button[type=submit]")
    page.wait_for_selector("#token-box:not([hidden])")
    token = page.inner_text("#new-token").strip()
    assert token.startswith(f"agt_{org.slug}_")
    shoot(page, "identity-created")
    page.click("#token-box >> text=Done")
    row = "tr[data-custom-id=browser_bot]"
    page.wait_for_selector(row)
    assert token not in page.content()
    # Edit
    page.click(f"{row} [data-action=edit]")
    page.fill(f"{row} [data-edit-form] input[name=display_name]", "Renamed Bot")
    page.click(f"{row} [data-edit-form] button[type=submit]")
    page.wait_for_selector("tr[data-display-name='Renamed Bot']")
    with org.context():
        assert IdentityProfile.objects.get(agent__name="browser_bot").display_name == "Renamed Bot"
    # Rotate (emergency); every confirm is accepted and its question recorded.
    questions = []
    page.on("dialog", lambda dialog: (questions.append(dialog.message), dialog.accept()))
    page.check(f"{row} [data-emergency]")
    page.click(f"{row} [data-action=rotate]")
    page.wait_for_selector("#token-box:not([hidden])")
    rotated = page.inner_text("#new-token").strip()
    assert rotated != token and rotated.startswith("agt_")
    # A second user of the org adds the agent, then the creator deletes it after the preview.
    member = membership_set(org=org.org, username=f"friend-{org.slug}", password="pw", is_admin=False)
    _, key = api_key_create(org=org.org, user=member.user)
    friend = Client(HTTP_AUTHORIZATION=f"Bearer {key}")
    with org.context():
        agent_id = IdentityProfile.objects.get(agent__name="browser_bot").agent_id
    assert post(friend, f"/v1/identity/agents/{agent_id}/relations").status_code == 201
    page.goto("/console/identity/")
    page.click(f"{row} [data-action=delete]")
    page.wait_for_selector(row, state="detached")
    assert any("1 relation with 1 user will end" in q for q in questions), questions
    with org.context():
        assert not IdentityProfile.objects.exists()
        assert InboxItem.objects.filter(user_id=member.user.get_username(), system_code="agent.deleted_by_creator").exists()
    shoot(page, "identity-list")
    # The friend sees the alert in the inbox page.
    friend_handle = type(org)(org=org.org, slug=org.slug, user=member.user, key=key, client=friend)
    page.context.clear_cookies()
    login(page, friend_handle)
    page.goto("/console/identity/inbox/")
    page.wait_for_selector("li.alert-item")
    assert "agent.deleted_by_creator" in page.inner_text("#inbox")
    assert "Renamed Bot" in page.inner_text("#inbox")
    shoot(page, "identity-inbox")


def test_inbox_page_receives_new_items_live(page, make_org, login):
    org = make_org("bl")
    created = create_agent(org.client, display_name="Live Bot").json()
    assert post(org.client, f"/v1/identity/agents/{created['agent_id']}/relations").status_code == 201
    login(page, org)
    page.goto("/console/identity/inbox/")
    page.wait_for_selector("#inbox-empty")
    from tests.identity.conftest import pair

    sent = pair(org.client, org.user.get_username(), created).send_to_user()
    assert sent.status_code == 201
    page.wait_for_selector("li.inbox-item[data-kind=envelope]", timeout=15000)
    assert created["agent_id"] in page.inner_text("#inbox")
