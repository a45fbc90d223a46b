"""Rough edges found by use (issue 57 items 4 and 5), in real Chromium on a live daphne.

- A user's own stop is not a failure: the dashboard's activity, the sessions list and the runs
  list read "stopped" in grey (the vocabulary's colour), never a red "failed"/"error".
- On a phone (390×844) the navigation folds behind "Menu", so the chat's message box is on the
  first screen; the webhooks and sessions lists become cards whose buttons and badges fit; event
  names never break mid-word.
- Words, not internals: the Steer box's help, a run's summary turn and the sessions list's
  "Latest turn" say what happened; "Ask before calling" names every bad entry at once.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents_site.vocabulary import BADGE_COLOURS, FinishReason, RunKind, RunStatus, SessionStatus

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
GREY = BADGE_COLOURS[FinishReason.STOPPED]


def _stopped_run(org, make_agent):
    """A chat run a user stopped, with its session ended as the run lifecycle ends it."""
    from agents_site.ids import mint_id
    from runs.models import Run
    from sessions import services as sessions

    agent = make_agent(org, "talker")
    now = timezone.now()
    with org.context():
        session = sessions.session_create(agent="talker", actor=f"{org.slug}/{org.user.get_username()}", title="Count slowly")
        sessions.session_append_event(session_id=session.id, kind="log", actor="talker", payload={
            "runId": "run_x", "status": RunStatus.ERROR, "model": "", "durationMs": 1500,
            "error": "stopped by you: enough", "finishReason": FinishReason.STOPPED})
        sessions.session_end(session_id=session.id, status=SessionStatus.ERROR, finish_reason=FinishReason.STOPPED)
        run = Run.objects.create(id=mint_id("run"), agent=agent, agent_name="talker", kind=RunKind.CHAT, status=RunStatus.ERROR,
                                 error="stopped by you: enough", output="one two", finish_reason=FinishReason.STOPPED,
                                 session_id=session.id, created_at=now - timedelta(seconds=2), started_at=now - timedelta(seconds=2),
                                 finished_at=now, duration_ms=1500)
    return run, session


def _badge_colour(page, selector):
    return page.eval_on_selector(selector, "n => n.style.getPropertyValue('--badge')")


def test_a_users_stop_reads_stopped_in_grey_on_the_dashboard_sessions_and_runs_lists(page, make_org, make_agent, login):
    org = make_org("sg")
    run, session = _stopped_run(org, make_agent)
    login(page, org)
    page.wait_for_selector(f"#activity li[data-kind=failed][data-finish={FinishReason.STOPPED}]")
    badge = "#activity li[data-finish=stopped] .badge"
    assert page.get_attribute(badge, "data-status") == FinishReason.STOPPED and _badge_colour(page, badge) == GREY
    assert page.locator("#activity .badge[data-status=failed]").count() == 0

    page.goto("/console/sessions/")
    row = f"#sessions-table tr[data-session='{session.id}']"
    page.wait_for_selector(row)
    assert page.get_attribute(f"{row} .badge", "data-status") == FinishReason.STOPPED and _badge_colour(page, f"{row} .badge") == GREY
    assert page.inner_text(f"{row} td.latest").startswith("log: stopped by you")

    page.goto("/console/runs/")
    line = f"tr[data-run='{run.id}']"
    assert page.get_attribute(f"{line} .badge", "data-status") == FinishReason.STOPPED
    assert page.locator(f"{line} .err").count() == 0  # the stop's words in plain grey, not a failure's red
    assert page.inner_text(f"{line} .stop-reason") == "stopped by you: enough"


def test_on_a_phone_the_menu_folds_and_the_chat_box_is_on_the_first_screen(page, make_org, login):
    org = make_org("ph")
    page.set_viewport_size(PHONE)
    login(page, org)
    page.goto("/console/chat/")
    page.wait_for_selector("#chat-with option[value='preset:assistant']", state="attached")
    box = page.locator("#chat-input").bounding_box()
    assert box["y"] + box["height"] <= PHONE["height"], box  # was y≈925 behind 22 navigation links
    assert page.is_hidden("#console-nav")
    page.click("#menu-toggle")
    assert page.is_visible("#console-nav a[href='/console/sessions/']")
    assert page.get_attribute("#menu-toggle", "aria-expanded") == "true"
    page.set_viewport_size({"width": 1280, "height": 800})
    assert page.is_hidden("#menu-toggle") and page.is_visible("#console-nav")


def test_on_a_phone_the_webhooks_and_sessions_lists_are_cards_that_fit(page, make_org, login, settings):
    from sessions import services as sessions
    from tests.webhooks.conftest import create_endpoint

    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    org = make_org("wc")
    create_endpoint(org, "http://127.0.0.1:9/hooks/" + "w" * 80, events=("run.finished", "session.published", "balance.low"))
    with org.context():
        done = sessions.session_create(agent="helper", actor="you", title="Add up the invoices")
        sessions.session_append_event(session_id=done.id, kind="log", actor="helper", payload={
            "runId": "run_1", "status": RunStatus.OK, "model": "test-model", "durationMs": 1200, "error": ""})
        sessions.session_end(session_id=done.id, status=SessionStatus.DONE)
    page.set_viewport_size(PHONE)
    login(page, org)

    page.goto("/console/webhooks/")
    page.wait_for_selector("#webhooks-table td.actions button")
    for right in page.eval_on_selector_all("#webhooks-table td.actions button", "ns => ns.map(n => n.getBoundingClientRect().right)"):
        assert right <= PHONE["width"], right  # none cut at the card's edge
    lines = page.eval_on_selector_all("#webhooks-table .event-name", "ns => ns.map(n => [n.textContent, n.getClientRects().length])")
    assert lines and all(count == 1 for _, count in lines), lines  # "run.finis|hed" no more

    page.goto("/console/sessions/")
    row = f"#sessions-table tr[data-session='{done.id}']"
    page.wait_for_selector(row)
    assert page.eval_on_selector(row, "n => getComputedStyle(n).display") == "block"  # a card, not a cut table row
    badge = page.locator(f"{row} .badge").bounding_box()
    assert badge["x"] + badge["width"] <= PHONE["width"]
    assert page.inner_text(f"{row} td.latest") == "log: run ok · test-model · 1.2 s"  # words, not a bare "log"

    page.goto(f"/console/sessions/{done.id}/")
    page.wait_for_selector("#events li[data-kind=log] .text")
    assert page.inner_text("#events li[data-kind=log] .text") == "run ok · test-model · 1.2 s"
    help_text = page.inner_text("#steer-help")
    assert "forwarded" not in help_text and "control" not in help_text and "surface" not in help_text


def test_ask_before_calling_names_every_bad_entry(page, make_org, make_agent, login):
    org = make_org("ab")
    make_agent(org, "careful", tools=["calculator"])
    login(page, org)
    page.goto("/console/agents/careful/edit/")
    page.fill("#id_approval", "http_get, calculator, sh*ll")
    page.click("#agent-form button[type=submit]")
    page.wait_for_selector("#id_approval-error")
    said = page.inner_text("#id_approval-error")
    assert "approval.tools[0]: 'http_get'" in said and "approval.tools[2]: '*' may only end a prefix" in said
