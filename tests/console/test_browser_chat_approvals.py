"""A chat with an agent that asks before calling a tool (issue 57 item 1), in real Chromium on a live
daphne: the round's `approval` frame shows a waiting notice with Approve/Deny, keeps the conversation
(address and list), and the reply appears once the resumed run finishes; a member who did not start
the run sees the request waiting without buttons, in the chat and on the session page.

The resume is the worker's part, run inline here (`runs.tasks.resume_run`) in the test's process:
another process than the page's server, as a django-q2 worker is — the page learns of it from the
store, not from an in-process frame.
"""

import pytest

from agents_site.vocabulary import ApprovalOutcome, ApprovalState, RunStatus
from chat.models import Conversation, Message
from runs.models import Approval, Run
from tests.support.upstream import Reply
from tests.support.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}


def _careful(org, make_agent):
    make_agent(org, "careful", instructions="Be careful.", tools=["calculator"], approval={"tools": ["calculator"]})


def _ask(page, text="what is 2+3?"):
    page.goto("/console/chat/")
    page.wait_for_selector("#chat-with option[value='agent:careful']", state="attached")
    page.select_option("#chat-with", "agent:careful")
    page.fill("#chat-input", text)
    page.click("#chat-send")


def test_an_approval_ruled_chat_waits_offers_approve_and_appends_the_reply(page, make_org, make_agent, login, upstream_server, upstream, shoot):
    org = make_org("ca")
    _careful(org, make_agent)
    upstream_server.script(Reply(tool_calls=[("calculator", {"expression": "2+3"})]))
    page.set_viewport_size(PHONE)
    login(page, org)
    _ask(page)
    page.wait_for_selector("#chat-waiting [data-approve]")
    assert "calculator" in page.inner_text("#chat-waiting")
    assert page.inner_text("#chat-state") == "Waiting for approval…"  # not "The stream ended without a result."
    assert page.is_hidden("#chat-error")
    with org.context():
        conversation = Conversation.objects.get()
        run = Run.objects.get()
        assert run.status == RunStatus.WAITING
    # The conversation is kept: its address, and its place in the list.
    assert page.url.endswith(f"/console/chat/{conversation.id}/")
    page.wait_for_selector(f"#chat-conversations a.current[data-conversation='{conversation.id}']")
    shoot(page, "chat-waiting")

    page.click("#chat-waiting [data-approve]")
    page.wait_for_selector("#chat-waiting [data-answer=approved]")
    with org.context():
        assert Approval.objects.get(run_id=run.id).state == ApprovalState.APPROVED
    from runs.tasks import resume_run  # the worker's part, inline

    upstream_server.script(Reply(content="It is 5."))
    assert resume_run(org.slug, run.id) == RunStatus.OK
    page.wait_for_selector("#chat-messages li.assistant .bubble:text-is('It is 5.')")
    page.wait_for_selector("#chat-waiting", state="detached")
    assert page.inner_text("#chat-state") == ""
    with org.context():
        assert [(m.role, m.content) for m in Message.objects.order_by("position")] == [("user", "what is 2+3?"), ("assistant", "It is 5.")]
    # Reopened from its address, the conversation reads back whole, with no waiting notice.
    page.goto(f"/console/chat/{conversation.id}/")
    page.wait_for_selector("#chat-messages li.assistant")
    assert page.locator("#chat-waiting").count() == 0


def test_a_member_sees_an_admins_waiting_round_without_buttons_and_a_deny_reads_denied(page, make_org, make_agent, login,
                                                                                     upstream_server, upstream):
    from tenancy.services import membership_set

    org = make_org("cm")
    _careful(org, make_agent)
    member = membership_set(org=org.org, username="member-" + org.slug, password="pw", is_admin=False)
    upstream_server.script(Reply(tool_calls=[("calculator", {"expression": "6*7"})]))
    login(page, org)
    _ask(page, "what is 6*7?")
    page.wait_for_selector("#chat-waiting [data-approve]")
    with org.context():
        conversation = Conversation.objects.get()
        run = Run.objects.get()

    handle = type(org)(org=org.org, slug=org.slug, user=member.user, key="", client=None)
    page.context.clear_cookies()
    login(page, handle)
    page.goto(f"/console/chat/{conversation.id}/")
    page.wait_for_selector("#chat-waiting .approval[data-state=pending]")
    assert page.locator("#chat-waiting [data-approve], #chat-waiting [data-deny]").count() == 0
    assert "or an org admin" in page.inner_text("#chat-waiting")
    page.goto(f"/console/sessions/{run.session_id}/")
    page.wait_for_selector("#approvals-card .approval[data-state=pending]")
    assert page.locator("#approvals-card [data-approve]").count() == 0
    assert "Waiting for" in page.inner_text("#approvals-card .waiting-for")

    # The admin (an org admin answers every run) denies it from the chat; the outcome reads "denied".
    page.context.clear_cookies()
    login(page, org)
    page.goto(f"/console/chat/{conversation.id}/")
    page.wait_for_selector("#chat-waiting [data-deny]")
    page.fill("#chat-waiting input.approval-message", "not now")
    page.click("#chat-waiting [data-deny]")
    page.wait_for_selector("#chat-waiting [data-answer=denied]")
    from runs.tasks import resume_run

    upstream_server.script(Reply(content="Understood, I will not calculate."))
    assert resume_run(org.slug, run.id) == RunStatus.OK
    page.wait_for_selector("#chat-messages li.assistant .bubble:text-is('Understood, I will not calculate.')")
    page.goto(f"/console/sessions/{run.session_id}/")
    page.wait_for_selector(f"#approvals-card .approval[data-outcome='{ApprovalOutcome.DENIED}']")
    assert page.get_attribute("#approvals-card .approval .badge", "data-status") == ApprovalOutcome.DENIED
    with org.context():
        wait_until(lambda: Approval.objects.get(run_id=run.id).state == ApprovalState.DONE, what="the denial handed to the model")
