"""The console hides what the viewer may not do (issue 50 item 1), in real Chromium on a live
daphne at 1280 and 390 px: a member sees Stop only on runs they started, and no Billing."""

import pytest

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("width", [1280, 390])
def test_a_member_sees_stop_only_on_their_own_run(page, make_org, login, console_server, width):
    from sessions.services import session_create
    from tenancy.services import membership_set

    org = make_org("pm")
    membership = membership_set(org=org.org, username=f"member-{org.slug}", password="pw", is_admin=False)
    member = type(org)(org=org.org, slug=org.slug, user=membership.user, key="", client=None)
    with org.context():
        theirs = session_create(agent="probe", actor=f"{org.slug}/{org.user.username}").id
        mine = session_create(agent="probe", actor=f"{org.slug}/{membership.user.username}").id

    page.set_viewport_size({"width": width, "height": 860})
    login(page, member)
    assert page.locator("a[href='/console/billing/']").count() == 0
    page.goto(f"/console/sessions/{theirs}/")
    page.wait_for_selector("#session-status .badge")
    assert page.is_hidden("button[data-command=stop]")
    assert page.is_visible("button[data-command=pause]")
    page.goto(f"/console/sessions/{mine}/")
    page.wait_for_selector("#session-status .badge")
    assert page.is_visible("button[data-command=stop]")
