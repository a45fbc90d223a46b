"""The views issue 34 added, in a real browser at 1280 and 390 px: the org's runs page, the
agent's generation settings, the form that shows every error at once, the session's publish
control, re-registering an identity agent's keys, and the one local date/time format."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from agents.models import Agent
from runs.models import Run
from tests.identity.conftest import create_agent

pytestmark = pytest.mark.django_db(transaction=True)

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}

_OVERFLOWING = """Array.from(document.querySelectorAll('body *'))
  .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1 && getComputedStyle(e).position !== 'fixed'
          && !e.closest('.table-scroll'))
  .slice(0, 8).map(e => e.tagName + '.' + e.className + ' right=' + Math.round(e.getBoundingClientRect().right))"""


def assert_fits(page, path: str) -> None:
    """Open `path` at 1280 px, then at 390 px (left open); fail on any horizontal overflow of the page."""
    for viewport in (DESKTOP, PHONE):
        page.set_viewport_size(viewport)
        page.goto(path)
        width = page.evaluate("document.documentElement.clientWidth")
        assert page.evaluate("document.documentElement.scrollWidth") <= width, (path, viewport, page.evaluate(_OVERFLOWING))


def test_runs_page_filters_in_the_browser_and_fits_a_phone(page, make_org, login, make_agent, make_runs, shoot):
    org = make_org("rp")
    long_name = "a-very-long-platform-agent-name-that-would-widen-a-table-" + "x" * 6
    one, two = make_agent(org, "one"), make_agent(org, long_name)
    ones = make_runs(org, one, 2)
    twos = make_runs(org, two, 1, status="error")
    with org.context():
        Run.objects.filter(pk=ones[0].pk).update(kind="chat", finish_reason="stopped", status="error", error="stopped")
        Run.objects.filter(pk=twos[0].pk).update(input="長い入力 " * 40, error="שגיאה ארוכה " * 20)
    login(page, org)
    page.click(".sidebar >> text=Runs")
    page.wait_for_url("**/console/runs/")
    assert page.locator("tr[data-run]").count() == 3
    page.select_option("#run-filters select[name=agent]", "one")
    page.select_option("#run-filters select[name=kind]", "chat")
    page.click("#run-filters button[type=submit]")
    page.wait_for_url(re.compile(r".*/console/runs/\?.*kind=chat.*"))
    rows = page.locator("tr[data-run]")
    assert rows.count() == 1 and rows.first.get_attribute("data-run") == ones[0].id
    assert rows.first.locator(".badge").inner_text() == "stopped"
    assert rows.first.locator(".run-kind").inner_text() == "chat round"
    shoot(page, "runs-filtered")
    assert_fits(page, "/console/runs/")
    shoot(page, "runs-phone")


def test_dates_are_the_viewers_local_time_with_the_iso_timestamp_in_the_tooltip(browser, console_server, make_org, login, make_agent, make_runs):
    org = make_org("tz")
    run = make_runs(org, make_agent(org, "one"), 1)[0]
    context = browser.new_context(base_url=console_server.url, timezone_id="Asia/Tokyo", locale="en-US", viewport=DESKTOP)
    context.set_default_timeout(30_000)
    try:
        pg = context.new_page()
        login(pg, org)
        pg.goto("/console/runs/")
        stamp = pg.locator(f"tr[data-run='{run.id}'] time").first
        iso = run.finished_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert stamp.get_attribute("title") == iso and stamp.get_attribute("data-localized") == ""
        expected = pg.evaluate("iso => new Date(iso).toLocaleString([], {year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit'})", iso)
        assert stamp.inner_text() == expected
        tokyo = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(__import__("zoneinfo").ZoneInfo("Asia/Tokyo"))
        assert str(tokyo.day) in expected and "UTC" not in expected  # Tokyo's date, not the server's text
        pg.goto("/console/agents/")  # the same one format on another page
        assert pg.locator("#agents-table time[data-localized]").first.inner_text() != ""
    finally:
        context.close()


def test_agent_form_shows_every_error_at_once_and_clears_one_when_its_field_changes(page, make_org, login, shoot):
    org = make_org("fe")
    login(page, org)
    page.goto("/console/agents/new/")
    assert page.locator("#tool-picker input[data-tool=http_get]").count() == 0
    assert "does not let agents fetch web pages" in page.inner_text("#tools-not-offered")
    page.fill("#id_name", "bad name!")
    page.fill("#id_temperature", "9")
    page.fill("#id_top_p", "0")
    page.fill("#id_timezone", "Mars/Olympus")
    page.click("button:has-text('Create agent')")
    assert page.inner_text("#form-error p") == "4 problems to fix:"
    for field in ("name", "temperature", "top_p", "timezone"):
        assert page.locator(f"#id_{field}-error").is_visible()
        assert page.get_attribute(f"#id_{field}", "aria-invalid") == "true"
    shoot(page, "agent-form-errors")
    page.fill("#id_temperature", "0.5")
    assert page.locator("#id_temperature-error").is_hidden()
    assert page.get_attribute("#id_temperature", "aria-invalid") is None
    assert page.locator("#id_name-error").is_visible()  # the others stay until they are fixed
    assert page.locator("button:has-text('Create agent')").is_visible()
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    with org.context():
        assert Agent.objects.count() == 0


def test_agent_page_shows_generation_settings_and_fits_a_phone(page, make_org, login, make_agent):
    org = make_org("gs")
    make_agent(org, "tuned", max_tokens=256, temperature=0.2, top_p=0.9)
    login(page, org)
    page.goto("/console/agents/tuned/")
    assert page.inner_text("#generation-settings [data-setting=maxTokens] dd") == "256"
    assert page.inner_text("#generation-settings [data-setting=temperature] dd") == "0.2"
    assert_fits(page, "/console/agents/tuned/")


def test_session_page_publishes_and_unpublishes_with_a_project(page, make_org, login):
    from sessions import services
    from sessions.models import Session

    org = make_org("pb")
    with org.context():
        session_id = services.session_create(agent="coder", actor="t", title="A build").id
    login(page, org)
    page.goto(f"/console/sessions/{session_id}/")
    page.fill("#publish-project", "todo-app")
    page.click("#publish-card button:has-text('Publish')")
    page.wait_for_selector("#publish-state a")
    assert "Published as a public build of project todo-app." in page.inner_text(".flash")
    with org.context():
        assert Session.objects.filter(pk=session_id, published=True, project="todo-app").exists()
    public = page.get_attribute("#publish-state a", "href")
    assert public == f"/builds/{org.slug}/todo-app/{session_id}/"
    assert_fits(page, f"/console/sessions/{session_id}/")
    page.set_viewport_size(DESKTOP)
    page.click("#publish-card button:has-text('Unpublish')")
    page.wait_for_selector("#publish-project")
    with org.context():
        assert Session.objects.filter(pk=session_id, published=False, project="todo-app").exists()


def test_identity_page_re_registers_keys_made_in_the_browser(page, make_org, login):
    from identity.models import AgentKeySet

    org = make_org("rk")
    created = create_agent(org.client, display_name="Mine", custom_id="mine_agent").json()
    rotated = org.client.post(f"/v1/identity/agents/{created['agent_id']}/token/regenerate", '{"emergency": true}', content_type="application/json")
    assert rotated.status_code == 200
    login(page, org)
    page.goto("/console/identity/")
    page.on("dialog", lambda dialog: dialog.accept())
    page.click(f"tr[data-agent='{created['agent_id']}'] [data-action=rekey]")
    page.wait_for_selector("#keys-box:not([hidden])")
    jwk = page.inner_text("#new-x25519")
    assert '"crv":"X25519"' in jwk and '"d":' in jwk  # the private half, shown once, made here
    assert page.locator("#new-webhook-secret-row").is_hidden()
    with org.context():
        current = AgentKeySet.objects.get(agent_id=created["agent_id"], revoked_at__isnull=True)
    assert '"x":' in jwk and current.public_key  # registered: one current set
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, page.evaluate(_OVERFLOWING)


def test_a_stopped_run_on_the_agent_page_reads_stopped_not_error(page, make_org, make_agent, login, console_server, upstream_server):
    import httpx

    from tests.runs.test_run_session import running_session
    from tests.support.upstream import Reply

    org = make_org("sp")
    make_agent(org, "talker")
    upstream_server.script(Reply(content="word " * 300, delay=30))  # the run form's /run is asked not streamed: a slow whole answer
    login(page, org)
    page.goto("/console/agents/talker/")
    page.fill("#run-input", "talk")
    page.click("#run-button")
    session_id = running_session(org, timeout=30)
    api = httpx.Client(base_url=console_server.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=30)
    assert api.post(f"/v1/agents/sessions/{session_id}/stop", json={}).status_code in (200, 202)
    page.wait_for_selector("#run-status .badge[data-status=stopped]", timeout=30_000)
    assert page.inner_text("#run-state") == "Stopped."
    assert "failed" not in (page.get_attribute("#run-output", "class") or "")
    assert page.is_hidden("#run-error")
    row = page.locator("#recent-runs tr[data-run]").first
    row.locator(".badge[data-status=stopped]").wait_for()
    assert row.locator("time[data-localized]").count() == 1  # the swapped-in history keeps the one date format
    with org.context():
        assert Run.objects.get().finish_reason == "stopped"
    # Reopened later, the session of a stopped run reads "stopped" too (its summary turn carries finishReason).
    summary = api.get(f"/v1/agents/sessions/{session_id}").json()["recentEvents"][-1]
    assert summary["kind"] == "log" and summary["payload"]["finishReason"] == "stopped"
    page.goto(f"/console/sessions/{session_id}/")
    page.wait_for_selector("#session-status .badge[data-status=stopped]")
    page.wait_for_function("document.getElementById('control-result').textContent.startsWith('This session was stopped')")


def test_identity_create_form_shows_every_refused_field_at_once(page, make_org, login):
    from identity.models import IdentityProfile

    org = make_org("ie")
    login(page, org)
    page.goto("/console/identity/")
    page.fill("#identity-create input[name=custom_id]", "A")
    page.fill("#identity-create input[name=webhook_url]", "not a url")
    page.click("#identity-create button[type=submit]")
    page.wait_for_selector("#identity-error:not([hidden])")
    items = page.locator("#identity-error li").all_inner_texts()
    assert page.inner_text("#identity-error p").endswith(f"{len(items)} problems to fix:") and len(items) >= 2
    assert any(text.startswith("Display name: ") for text in items)
    assert any(text.startswith("Custom id: ") for text in items)
    with org.context():
        assert IdentityProfile.objects.count() == 0
