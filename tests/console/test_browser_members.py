"""Members and roles in a real browser (issue 34 item 1): invite, join, change a role, remove; create a user.

Debian's chromium under Playwright against the live daphne, at 1280 and 390 px wide: no page
scrolls sideways, no JavaScript error, and what the page says is what was stored.
"""

from __future__ import annotations

import pytest

from tenancy.models import ApiKey, Membership
from tenancy.services import api_key_create

pytestmark = pytest.mark.django_db(transaction=True)


def _no_sideways_scroll(page, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 844 if width < 500 else 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def _second_browser(browser, console_server):
    context = browser.new_context(base_url=console_server.url, viewport={"width": 390, "height": 844})
    context.set_default_timeout(30_000)
    return context


def test_an_admin_invites_a_user_who_joins_then_changes_their_role_and_removes_them(page, browser, console_server, make_org, login, shoot):
    org = make_org("mi")
    guest = make_org("mg")  # a user of another org: joins only by accepting the link
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    failed: list[str] = []
    page.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
    login(page, org)
    page.click(".sidebar >> text=Members")
    page.select_option("#id_invite_role", "member")
    page.fill("#id_invite_note", "for the guest")
    page.click("button:has-text('Make an invitation link')")
    link = page.inner_text("#invite-link").strip()
    assert "/console/invite/inv_" in link
    shoot(page, "members-invite")
    _no_sideways_scroll(page, 390)
    shoot(page, "members-invite-390")
    page.set_viewport_size({"width": 1280, "height": 800})

    context = _second_browser(browser, console_server)
    try:
        other = context.new_page()
        other.on("response", lambda response: failed.append(response.url) if response.status >= 400 else None)
        login(other, guest)
        other.goto(link)
        assert f"Join {org.slug}" in other.inner_text("h1")
        _no_sideways_scroll(other, 390)
        other.click("#accept-form button")
        other.wait_for_url("**/console/")
        assert f"You joined {org.slug}." in other.inner_text(".flash")
        assert other.locator(".org-switch select").input_value() == org.slug
        again = other.goto(link)  # works once
        assert again.status == 404 and "does not work" in other.inner_text("h1")
    finally:
        context.close()
    assert Membership.objects.filter(org=org.org, user=guest.user, is_admin=False).exists()
    _, guest_key = api_key_create(org=org.org, user=guest.user)

    page.goto("/console/members/")
    row = f"tr[data-member='{guest.user.username}']"
    assert page.inner_text(f"{row} td.num") == "1"
    assert "Accepted by" in page.inner_text("#invitations-table")
    page.select_option(f"{row} select", "admin")  # submits itself
    page.wait_for_selector(".flash:has-text('Role changed.')")
    assert Membership.objects.get(org=org.org, user=guest.user).is_admin
    shoot(page, "members")
    _no_sideways_scroll(page, 390)
    shoot(page, "members-390")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.on("dialog", lambda dialog: dialog.accept())
    page.click(f"{row} button:has-text('Remove')")
    page.wait_for_selector(".flash:has-text('Member removed')")
    assert page.locator(row).count() == 0
    assert not Membership.objects.filter(org=org.org, user=guest.user).exists()
    assert ApiKey.objects.get(org=org.org, user=guest.user).revoked_at is not None
    assert errors == [] and failed == [link]  # the one 404: the used link, on purpose


def test_an_admin_creates_a_user_who_signs_in_with_the_first_password(page, browser, console_server, make_org, login, shoot):
    org = make_org("mc")
    taken = make_org("mt")
    login(page, org)
    page.goto("/console/members/")
    page.fill("#id_username", taken.user.username)
    page.fill("#id_password", "a fine long pass 9")
    page.click("button:has-text('Create the user')")
    assert "send them an invitation link instead" in page.inner_text("#create-error")
    assert page.input_value("#id_username") == taken.user.username
    shoot(page, "members-create-refused")
    assert not Membership.objects.filter(org=org.org, user=taken.user).exists()
    page.fill("#id_username", "first-timer")
    page.fill("#id_password", "a fine long pass 9")
    page.click("button:has-text('Create the user')")
    page.wait_for_selector(".flash:has-text('first-timer can sign in now')")
    row = "tr[data-member='first-timer']"
    assert page.locator(f"{row} summary:has-text('Set first password')").count() == 1
    assert page.locator(f"tr[data-member='{org.user.username}'] summary").count() == 0  # an admin who signed in
    context = _second_browser(browser, console_server)
    try:
        newcomer = context.new_page()
        newcomer.goto("/console/login/")
        newcomer.fill("#id_username", "first-timer")
        newcomer.fill("#id_password", "a fine long pass 9")
        newcomer.click("button[type=submit]")
        newcomer.wait_for_url("**/console/")
        assert newcomer.inner_text(".org-name") == org.slug
        _no_sideways_scroll(newcomer, 390)
    finally:
        context.close()
    page.goto("/console/members/")
    assert page.locator(f"{row} summary").count() == 0  # signed in now: only they change their password
