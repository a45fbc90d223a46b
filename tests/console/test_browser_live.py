"""The live parts of the console in a real browser: runs, sessions streaming in, steering,
secret refusal, the dashboard, and the public gallery (Debian's chromium + live daphne).

Set-up writes go to the live server over HTTP with the org's API key, the way a running
agent surface writes them, so its bus fans them out to the page under test.
"""

import threading

import httpx
import pytest

from runs.models import Run
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def _api(server, org):
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=30)


def _session(api, **body) -> dict:
    response = api.post("/v1/agents/sessions", json={"agent": "builder", **body})
    assert response.status_code == 201, response.text
    return response.json()


def test_admin_runs_an_agent_and_sees_the_live_session_then_the_output(page, make_org, make_agent, login, shoot, upstream_server):
    org = make_org("lr")
    make_agent(org, "writer", instructions="Answer in one line.")
    upstream_server.script(Reply(content="Four, of course.", delay=1.0))
    login(page, org)
    page.goto("/console/agents/writer/")
    page.fill("#run-input", "What is 2+2?")
    page.click("#run-button")
    page.wait_for_selector("#run-live:not([hidden])")  # the session shows while the model thinks
    assert page.locator("#run-result").is_hidden()
    assert page.inner_text("#run-session-status") == "running"
    page.wait_for_selector("#run-result:not([hidden])")
    assert page.inner_text("#run-output") == "Four, of course."
    assert page.inner_text("#run-status") == "ok"
    session_id = page.inner_text("#run-session-link")
    assert session_id.startswith("sess_")
    page.wait_for_selector("#run-events li")
    page.wait_for_selector("#recent-runs tr[data-run]")  # the history re-read after the run
    # The result is shown once: the reply is the assistant's turn; the box keeps status and figures.
    page.wait_for_selector("#run-events li[data-speaker=assistant]")
    assert page.inner_text("#run-events li[data-speaker=assistant] .body .text") == "Four, of course."
    page.wait_for_selector("#run-output", state="hidden")
    assert page.inner_text("#run-count") == "1"
    with org.context():
        run = Run.objects.get(agent_name="writer")
        assert (run.status, run.output, run.input, run.session_id) == ("ok", "Four, of course.", "What is 2+2?", session_id)
    shoot(page, "agent-run")


def test_a_failed_run_shows_its_error_in_words(page, make_org, make_agent, login, upstream_server):
    org = make_org("lf")
    make_agent(org, "fragile")
    upstream_server.script(Reply(status=400, error_body={"error": {"message": "context length exceeded", "type": "invalid_request_error"}}))
    login(page, org)
    page.goto("/console/agents/fragile/")
    page.fill("#run-input", "x")
    page.click("#run-button")
    page.wait_for_selector("#run-result:not([hidden])")
    assert page.inner_text("#run-status") == "error"
    assert "context length exceeded" in page.inner_text("#run-output")
    with org.context():
        assert Run.objects.get(agent_name="fragile").status == "error"


def test_a_second_runs_session_and_events_arrive_live(page, make_org, make_agent, login, console_server, upstream_server, shoot):
    org = make_org("ls")
    make_agent(org, "live")
    api = _api(console_server, org)
    assert api.post("/v1/agents/live/run", json={"input": "first"}).status_code == 200
    login(page, org)
    page.goto("/console/sessions/")
    page.wait_for_selector("#sessions-table tbody tr")
    assert page.locator("#sessions-table tbody tr").count() == 1
    page.wait_for_selector("#stream-state:has-text('live')")
    upstream_server.script(Reply(content="second answer", delay=1.5))
    worker = threading.Thread(target=lambda: api.post("/v1/agents/live/run", json={"input": "second run"}))
    worker.start()
    page.wait_for_function("document.querySelectorAll('#sessions-table tbody tr').length === 2")
    newest = page.locator("#sessions-table tbody tr").first
    assert "second run" in newest.inner_text()
    shoot(page, "sessions")
    newest.locator("a").first.click()
    page.wait_for_selector("#events li")
    worker.join(timeout=30)
    page.wait_for_selector("#session-status .badge[data-status=done]")
    page.wait_for_selector("#tree .badge[data-status=done]")
    assert "second answer" in page.inner_text("#events")


def test_session_page_streams_turns_and_pause_stop_show_forwarded(page, make_org, login, console_server, shoot):
    org = make_org("lc")
    api = _api(console_server, org)
    session = _session(api, title="Refactor the parser")
    login(page, org)
    page.goto(f"/console/sessions/{session['id']}/")
    page.wait_for_selector("#stream-state[data-state=open]")
    child = _session(api, agent="helper", parentSessionId=session["id"], title="write tests")
    for text in ("reading the code", "found the bug"):
        assert api.post(f"/v1/agents/sessions/{session['id']}/events", json={"kind": "message", "payload": {"text": text}}).status_code == 201
    page.wait_for_selector("#events li[data-seq='2']")
    assert "found the bug" in page.inner_text("#events")
    page.wait_for_selector(f"#tree li[data-session='{child['id']}']")
    page.click("button[data-command=pause]")
    page.wait_for_selector(".control-ok[data-command=pause]")
    assert page.get_attribute(".control-ok[data-command=pause]", "data-forwarded") == "false"
    assert "reads it before its next step" in page.inner_text("#control-result")  # words, not `forwarded: false` (issue 57)
    page.fill("#control-message", "wrap it up")
    page.click("button[data-command=stop]")
    page.wait_for_selector(".control-ok[data-command=stop]")
    page.wait_for_selector("#events li[data-seq='4'][data-kind=control]")
    shoot(page, "session")
    detail = api.get(f"/v1/agents/sessions/{session['id']}").json()
    commands = [e["payload"]["command"] for e in detail["recentEvents"] if e["kind"] == "control"]
    assert commands == ["pause", "stop"]
    assert detail["status"] == "running"  # a command is an intent, not a status change
    assert api.patch(f"/v1/agents/sessions/{session['id']}", json={"status": "done"}).status_code == 200
    page.wait_for_selector("#session-status .badge[data-status=done]")
    assert page.locator("button[data-command=pause]").is_disabled()


def test_a_secret_is_refused_with_masked_findings_and_not_stored(page, make_org, login, console_server):
    org = make_org("lk")
    api = _api(console_server, org)
    session = _session(api)
    login(page, org)
    page.goto(f"/console/sessions/{session['id']}/")
    page.wait_for_selector("#stream-state[data-state=open]")
    secret = "AKIAIOSFODNN7EXAMPLQ"
    page.fill("#append-text", f"deploy with {secret}")
    page.click("#append-form button")
    page.wait_for_selector("#append-error")
    shown = page.inner_text("#append-error")
    assert "secret_in_transcript" in shown and "aws-access-key-id" in shown
    assert secret not in page.content()
    assert "AKIA" + "*" * 12 + "AMPLQ"[-4:] in shown
    assert api.get(f"/v1/agents/sessions/{session['id']}").json()["events"] == 0


def test_dashboard_draws_the_chart_and_the_activity(page, make_org, make_agent, login, console_server, shoot):
    org = make_org("ld")
    make_agent(org, "alpha")
    make_agent(org, "beta")
    api = _api(console_server, org)
    for ref in ("alpha", "alpha", "beta"):
        assert api.post(f"/v1/agents/{ref}/run", json={"input": "hi"}).status_code == 200
    login(page, org)
    page.wait_for_selector("#chart svg")
    assert page.get_attribute("#chart svg", "data-total") == "3"
    assert "alpha (2)" in page.inner_text("#chart .legend")
    assert page.locator("#activity li[data-kind=invoked]").count() == 3
    assert page.locator("#activity li[data-kind=created]").count() == 2
    shoot(page, "dashboard")
    page.click("button[data-range='7d']")
    page.wait_for_selector("button.on[data-range='7d']")
    page.wait_for_selector("#chart svg")
    assert page.get_attribute("#chart svg", "data-total") == "3"


def test_a_published_build_opens_anonymously_and_an_unpublished_one_does_not(page, make_org, console_server, shoot):
    org = make_org("lg")
    api = _api(console_server, org)
    published = _session(api, title="Shop front", project="shop", published=True, repo="acme/shop")
    api.post(f"/v1/agents/sessions/{published['id']}/events", json={"kind": "message", "payload": {"text": "Build the cart page", "model": "test-model"}})
    api.post(f"/v1/agents/sessions/{published['id']}/events", json={"kind": "tool-call", "payload": {"text": "added cart.py", "commit": "0123abcd", "subject": "Add the cart"}})
    _session(api, title="Secret plan", project="hidden")
    page.goto("/builds/")
    row = page.locator(f"tr[data-build='{org.slug}/shop']")
    assert row.count() == 1
    assert page.locator(f"tr[data-build='{org.slug}/hidden']").count() == 0
    shoot(page, "gallery")
    row.locator("a").click()
    page.wait_for_url(f"**/builds/{org.slug}/shop/{published['id']}/")
    assert "Build the cart page" in page.inner_text("#turns")
    assert "0123abcd" in page.inner_text("li[data-turn='2']") and "Add the cart" in page.inner_text("li[data-turn='2']")
    assert page.inner_text("#verify").startswith("git log")
    shoot(page, "build")
    assert page.goto(f"/builds/{org.slug}/hidden/").status == 404
    assert page.goto("/builds/no-such-org/shop/").status == 404


def test_the_session_page_reconnects_and_is_replayed_what_it_missed(browser, make_org, login, upstream_server):
    """Stop the server under an open page, append a turn while it is down, start it again on
    the same port: the browser's EventSource reconnects with Last-Event-ID and the server
    replays the missed turn from the store (a fresh stream would start after it)."""
    from sessions.services import session_append_event
    from tests.support.live import LiveServer

    env = {"INFERENCE_BASE_URL": upstream_server.base_url, "AGENTS_SSE_CATCHUP_SECONDS": "1"}
    server = LiveServer(env).start()
    context = browser.new_context(base_url=server.url)
    context.set_default_timeout(15_000)
    try:
        page = context.new_page()
        org = make_org("lre")
        api = _api(server, org)
        session = _session(api, title="long job")
        login(page, org)
        page.goto(f"/console/sessions/{session['id']}/")
        page.wait_for_selector("#stream-state[data-state=open]")
        api.post(f"/v1/agents/sessions/{session['id']}/events", json={"kind": "log", "payload": {"text": "before the drop"}})
        page.wait_for_selector("#events li[data-seq='1']")
        server.proc.kill()  # a crash, not a graceful close
        server.proc.wait()
        page.wait_for_selector("#stream-state[data-state=reconnecting]")
        with org.context():
            session_append_event(session_id=session["id"], kind="log", payload={"text": "while you were away"}, actor="test")
        restarted = LiveServer(env)
        restarted.port = server.port
        server = restarted.start()
        page.wait_for_selector("#events li[data-seq='2']", timeout=20_000)
        assert "while you were away" in page.inner_text("#events li[data-seq='2']")
        assert page.locator("#events li").count() == 2
    finally:
        context.close()
        server.stop()


def test_a_run_cut_by_the_token_limit_is_marked_on_the_agent_page(page, make_org, make_agent, login, upstream_server):
    org = make_org("lt")
    make_agent(org, "terse")
    upstream_server.script(Reply(content="Once upon a ti", finish="length"))
    login(page, org)
    page.goto("/console/agents/terse/")
    page.fill("#run-input", "Tell me a story")
    page.click("#run-button")
    page.wait_for_selector("#run-result:not([hidden])")
    page.wait_for_function("document.getElementById('run-meta').textContent.indexOf('cut off at the token limit') >= 0")
    assert page.inner_text("#run-status") == "ok" and page.get_attribute("#run-status", "data-finish") == "length"
