"""The session page's Stop against a real run (issue 25 item 4), in real Chromium on a live
daphne: the button's answer shows "stopping…" until the session reports a terminal status, then
"stopped" — never an error banner for the user's own stop — at 1280 and 390 px."""

import json
import threading

import httpx
import pytest

from runs.models import Run
from tests.runs.test_run_session import running_session
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)

#: Records every state the stop's answer shows (a state may last less than a poll).
WATCH = """() => {
  window.stopStates = [];
  new MutationObserver(() => {
    const node = document.getElementById("stop-state");
    const state = node && node.dataset.state;
    if (state && window.stopStates[window.stopStates.length - 1] !== state) window.stopStates.push(state);
  }).observe(document.getElementById("control-result"), { childList: true, subtree: true });
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_stop_on_the_session_page_shows_stopping_then_stopped_and_no_error(page, make_org, make_agent, login, console_server,
                                                                            upstream_server, width):
    org = make_org("st")
    make_agent(org, "talker")
    upstream_server.script(Reply(content="word " * 300, chunk_size=5, chunk_delay=0.1))
    api = httpx.Client(base_url=console_server.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=60)
    answered: dict = {}
    # Streamed: the gateway is asked streamed, so the stop lands mid-reply (decision 1534).
    caller = threading.Thread(target=lambda: answered.update(response=api.post("/v1/agents/talker/run", json={"input": "talk", "stream": True})),
                              daemon=True)
    caller.start()
    session_id = running_session(org, timeout=30)

    page.set_viewport_size({"width": width, "height": 860})
    login(page, org)
    page.goto(f"/console/sessions/{session_id}/")
    page.wait_for_selector("#stream-state[data-state=open]")
    page.evaluate(WATCH)
    page.click("button[data-command=stop]")
    page.wait_for_selector("#stop-state[data-state=stopped]", timeout=30_000)
    caller.join(30)

    assert page.evaluate("window.stopStates") == ["stopping", "stopped"]
    assert page.locator("#control-result .alert.error").count() == 0 and page.is_hidden("#session-error")
    assert page.inner_text("#stop-state") == "stopped"
    assert page.locator("button[data-command=pause]").is_disabled()
    assert json.loads(answered["response"].text.rstrip().split("\n")[-1][len("data: "):])["finishReason"] == "stopped"  # the final `run` frame
    with org.context():
        assert Run.objects.get().finish_reason == "stopped"
