"""Share links in the console (issue 57 item 3), in real Chromium on a live daphne: a session's and a
conversation's link made from their pages (the address shown once), read by anyone at 1280 and 390
px, listed with its state and revoked — after which the same address is the 404 page. A member who
did not start the session is told who may share it, with nothing to press."""

import pytest

from chat.models import ShareLink
from sessions import services as sessions

pytestmark = pytest.mark.django_db(transaction=True)


def _session(org):
    with org.context():
        session = sessions.session_create(agent="helper", actor=f"{org.slug}/{org.user.username}", title="Add up the invoices")
        for kind, payload in [("message", {"role": "user", "text": "What is 17 + 25?"}),
                              ("tool-call", {"name": "calculator", "arguments": {"expression": "17+25"}, "result": "42"}),
                              ("control", {"command": "pause", "message": "a steering note"}),
                              ("message", {"role": "assistant", "text": "It is 42."})]:
            sessions.session_append_event(session_id=session.id, kind=kind, payload=payload, actor="helper")
    return session


def test_a_session_link_is_made_read_anonymously_and_revoked(page, browser, console_server, make_org, login, shoot):
    org = make_org("sh")
    session = _session(org)
    login(page, org)
    page.goto(f"/console/sessions/{session.id}/")
    page.wait_for_selector("#share-card .share-create:not([hidden]) .share-make")
    page.select_option("#share-card .share-days", "7")
    page.click("#share-card .share-make")
    page.wait_for_selector("#share-card .share-new .share-url")
    url = page.inner_text("#share-card .share-new .share-url")
    assert url.startswith(f"{console_server.url}/shared/shr_{org.slug}_")
    page.wait_for_selector("#share-card .share-list li[data-state=active]")
    assert page.locator("#share-card .share-new .share-url").count() == 1  # still shown after the list is read again
    shoot(page, "session-share")

    anonymous = browser.new_context(viewport={"width": 390, "height": 844})
    try:
        reader = anonymous.new_page()
        for width in (390, 1280):
            reader.set_viewport_size({"width": width, "height": 844})
            answer = reader.goto(url)
            assert answer.status == 200
            assert [li.get_attribute("data-speaker") for li in reader.query_selector_all("#shared-turns li")] == ["user", "tool-call", "assistant"]
            assert "It is 42." in reader.inner_text("#shared-turns") and "a steering note" not in reader.inner_text("body")
            assert org.user.username in reader.inner_text("#shared-by")
            assert reader.evaluate("document.documentElement.scrollWidth") <= width  # nothing spills sideways
        shoot(reader, "shared-session")

        page.click("#share-card .share-list [data-revoke]")
        page.wait_for_selector("#share-card .share-list li[data-state=revoked]")
        assert reader.goto(url).status == 404  # at once
        assert "It is 42." not in reader.inner_text("body")
    finally:
        anonymous.close()
    with org.context():
        assert ShareLink.objects.get().revoked_at is not None


def test_a_conversation_is_shared_from_the_chat_and_a_member_cannot_share_an_admins_session(page, make_org, login, upstream_server):
    from tenancy.services import membership_set

    org = make_org("sc")
    session = _session(org)
    member = membership_set(org=org.org, username="member-" + org.slug, password="pw", is_admin=False)
    conversation = org.client.post("/v1/agents/chat/conversations", {"title": "Notes", "messages": [{"role": "user", "content": "remember 42"}]},
                                   content_type="application/json").json()["conversationId"]
    login(page, org)
    page.goto(f"/console/chat/{conversation}/")
    page.wait_for_selector("#chat-share-toggle:not([hidden])")
    page.click("#chat-share-toggle")
    page.wait_for_selector("#chat-share .share-create:not([hidden]) .share-make")
    page.click("#chat-share .share-make")
    page.wait_for_selector("#chat-share .share-new .share-url")
    page.wait_for_selector("#chat-share .share-list li[data-state=active]")
    with org.context():
        assert ShareLink.objects.get().subject_id == conversation

    handle = type(org)(org=org.org, slug=org.slug, user=member.user, key="", client=None)
    page.context.clear_cookies()
    login(page, handle)
    page.goto(f"/console/sessions/{session.id}/")
    page.wait_for_function("document.querySelector('#share-card .share-note').textContent.length > 0")
    assert page.inner_text("#share-card .share-note") == "Only the user who started it or an org admin may share it."
    assert page.is_hidden("#share-card .share-create")
