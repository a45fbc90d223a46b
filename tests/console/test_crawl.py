"""The crawl that keeps the console correct (issue 34 item 3): every console page and the public
gallery, as an org admin and as a member (the pages whose permissions differ answer 403), with
realistic rows (runs of every kind, a coding run with commits, identity agents with deliveries
and inbox items, a webhook endpoint with deliveries, chats — one waiting for approval, one the
user stopped — long names, CJK and RTL text, and a marker key inside the stored JSON payloads),
at 1280×800 and 390×844 in Chromium; a member's view of an admin's waiting run; a share link's
public page.

Each page fails on: an unexpected HTTP status, any resource answered 4xx/5xx, any JavaScript
console error or uncaught exception, any horizontal overflow of the document (wide tables scroll
inside their `.table-scroll` box), the marker key shown as page text (raw JSON where words
belong), and, at 1280 px, any serious or critical violation found by axe-core 4.14.1 (vendored at
tests/support/axe/, injected into the page). Every problem of every page is collected and the
test fails once with the whole list.

`AGENTS_CRAWL_SCREENSHOTS=DIR` (set by `make screenshots`) also writes each page at each width
to DIR (the ignored docs/screenshots/crawl/).
"""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = pytest.mark.django_db(transaction=True)

AXE = Path(__file__).resolve().parents[1] / "support" / "axe" / "axe.min.js"
MARKER = "zqCrawlMarkerKey"  # a key of stored JSON payloads: never page text
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
LONG = "a-very-long-agent-name-with-no-spaces-that-widens-tables-" + "x" * 6  # 63 characters, the longest name allowed
CJK = "請求書を集計して合計を報告する長いタイトル" * 3
RTL = "שלום עולם, זהו טקסט ארוך בעברית שנכתב מימין לשמאל " * 3

_OVERFLOWING = """() => Array.from(document.querySelectorAll('body *'))
  .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1
          && getComputedStyle(e).position !== 'fixed' && !e.closest('.table-scroll'))
  .slice(0, 6).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + String(e.className).split(' ').join('.') : '')
                        + ' right=' + Math.round(e.getBoundingClientRect().right))"""

# A box whose content spills out of it sideways (a badge over the text beside it, a word wider than
# its column): the page may still fit, but what spills lies over its neighbour. Scroll boxes and
# inline elements (no box width of their own) are not asked.
_SPILLING = """() => Array.from(document.querySelectorAll('main *'))
  .filter(e => e.clientWidth > 0 && e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible'
          && !e.closest('.table-scroll, pre, svg'))
  .slice(0, 6).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + (e.className ? '.' + String(e.className).split(' ').join('.') : '')
                        + ' ' + e.scrollWidth + '>' + e.clientWidth)"""

_AXE_RUN = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations'], runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']}});
  return result.violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.slice(0, 3).map(n => n.target.join(' ') + ' — ' + (n.failureSummary || '').split('\\n').slice(1, 2).join('')).join(' | '));
}"""


# --- the rows the pages show -----------------------------------------------------------------


def _payload(text: str, **extra) -> dict:
    return {"text": text, MARKER: {"nested": [1, 2, 3]}, **extra}


def post_json(client, path: str, body: dict) -> dict:
    response = client.post(path, body, content_type="application/json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def _seed(org, member_user, settings) -> dict:
    """Write every kind of row the console shows into `org`; return the ids the pages need."""
    from runs.models import Approval, Run
    from agents_site.vocabulary import RunKind
    from targets.models import Target
    from agents.services import AgentInput, agent_create
    from agents_site.ids import mint_id
    from chat.models import Conversation, Message
    from coding.models import CodingRun, Repo
    from sessions import services as sessions
    from tests.identity.conftest import create_agent, pair, post
    from tests.webhooks.conftest import create_endpoint
    from webhooks.models import EventAttempt, EventDelivery

    settings.AGENTS_WEBHOOK_ALLOW_HOSTS = ["127.0.0.1"]
    now = timezone.now()
    ids: dict = {}
    with org.context():
        plain = agent_create(data=AgentInput(name="helper", description="Answers questions about invoices " + CJK, instructions=RTL,
                                             max_tokens=256, temperature=0.2, tools=["calculator"]))
        agent_create(data=AgentInput(name=LONG, description=RTL))
        ids["agent"] = plain.name
        # One run of every kind; an error, a run still working, a reply cut by the token limit, a stop.
        kinds = list(RunKind.values) + ["run", "run"]
        statuses = ["ok", "error", "ok", "running", "ok", "ok", "ok", "ok", "error"]
        for i, (kind, status) in enumerate(zip(kinds, statuses)):
            at = now - timedelta(minutes=30 - i)
            Run.objects.create(
                id=mint_id("run"), agent=plain if kind != "coding" else None, agent_name=plain.name if kind != "coding" else "coding-dev",
                kind=kind, status=status, model="test-model-with-a-long-name/" + "q" * 40, input=f"{CJK} {i}",
                output=(RTL if status == "ok" else ""), error=("" if status != "error" else "The model said no " + "x" * 200),
                duration_ms=1200 + i, created_at=at, started_at=at, finished_at=None if status == "running" else at,
                finish_reason="length" if i == 4 else "stopped" if i == 8 else "",
            )
        # A finished session with log turns whose payloads carry the marker (the run summary shape).
        done = sessions.session_create(agent="helper", actor="crawler", title=CJK)
        for kind, payload in [
            ("message", {"role": "user", "text": "What is 17 + 25? " + RTL, MARKER: 1}),
            ("tool-call", {"name": "calculator", "arguments": {"expression": "17+25"}, "result": "42", "error": False}),
            ("message", {"role": "assistant", "text": "It is 42.", MARKER: 2}),
            ("status", {"phase": "done", MARKER: {"files": 3}}),
            ("log", {"runId": "run_" + "0" * 20, "error": "", "summary": "Answered\nin two lines", MARKER: True}),
        ]:
            sessions.session_append_event(session_id=done.id, kind=kind, payload=payload, actor="crawler")
        sessions.session_end(session_id=done.id, status="done")
        ids["session"] = done.id
        # A coding run with commits, published: the coding pages and the gallery.
        repo = Repo.objects.create(owner="acme", name="shop", clone_url="file:///nonexistent/shop.git", created_at=now, updated_at=now)
        coding_session = sessions.session_create(agent="coding-dev", actor="crawler", title="Add the cart " + CJK, repo="acme/shop", project="shop")
        sha = "0123456789abcdef0123456789abcdef01234567"
        for kind, payload in [
            ("message", {"role": "user", "text": "Add a cart total " + CJK, MARKER: 1}),
            ("tool-call", {"name": "write_file", "arguments": {"path": "cart.py", "content": "def total(xs):\n    return sum(xs)\n"}, "result": "wrote cart.py"}),
            ("commit", {"text": "Cart total works", "commit": sha, "subject": "Cart total works", "turn": 2,
                        "diffstat": " cart.py | 2 ++\n 1 file changed, 2 insertions(+)", "patch": "+def total(xs):\n+    return sum(xs)\n"}),
            ("log", {"runId": "run_x", "summary": "Cart total works\n\nsums the items", "branch": "agents/" + coding_session.id,
                     "commitSha": sha, "changed": True, "pushed": True, MARKER: 3}),
        ]:
            sessions.session_append_event(session_id=coding_session.id, kind=kind, payload=payload, actor="crawler")
        sessions.session_end(session_id=coding_session.id, status="done")
        sessions.session_update(session_id=coding_session.id, published=True, project="shop")
        coding_run = Run.objects.create(id=mint_id("run"), agent_name="coding-dev", kind="coding", status="ok", input="Add a cart total",
                                        session_id=coding_session.id, created_at=now, started_at=now, finished_at=now)
        CodingRun.objects.create(run_id=coding_run.id, session_id=coding_session.id, repo_id=repo.id, repo="acme/shop", project="shop",
                                 start_ref="main", branch="agents/" + coding_session.id, tool="dev", timeout_seconds=600, changed=True,
                                 pushed=True, head_sha=sha, diffstat=" cart.py | 2 ++", created_at=now,
                                 commits=[{"sha": sha, "subject": "Cart total works", "turn": 2, "diffstat": " cart.py | 2 ++"}])
        ids["coding_run"], ids["build"] = coding_run.id, coding_session.id
        # A machine with a long label, and a running session (shown live).
        Target.objects.create(id=mint_id("tgt"), owner=org.user.get_username(), label="build-box-" + "m" * 60, host="10.0.0.7",
                              capacity="4 cpu / 16 GiB", created_at=now, updated_at=now)
        running = sessions.session_create(agent="helper", actor="crawler", title=RTL[:60])
        sessions.session_append_event(session_id=running.id, kind="log", payload={"runId": "run_y", MARKER: 1}, actor="crawler")
        # A pending approval.
        Approval.objects.create(id=mint_id("apr"), run_id=coding_run.id, session_id=done.id, tool_call_id="call_1", tool_name="http_get",
                                arguments=json.dumps({"url": "https://example.com/" + "p" * 80}), created_at=now) if hasattr(Approval, "created_at") else None
        # A chat with CJK and RTL.
        conversation = Conversation.objects.create(title="請求書 " + RTL[:40], created_by=org.user.get_username(), turns=2, created_at=now, updated_at=now)
        Message.objects.create(conversation=conversation, position=0, role="user", content=CJK, created_at=now)
        Message.objects.create(conversation=conversation, position=1, role="assistant", content=RTL + " " + "y" * 120, created_at=now)
        ids["conversation"] = conversation.id
        # Issue 57's states: a chat round waiting for approval (the admin's run), a chat the user stopped.
        admin_actor = f"{org.slug}/{org.user.get_username()}"
        asking = agent_create(data=AgentInput(name="careful", tools=["calculator"], approval={"tools": ["calculator"]}))
        waiting_session = sessions.session_create(agent="careful", actor=admin_actor, title="What is 6*7? " + CJK)
        sessions.session_append_event(session_id=waiting_session.id, kind="message", payload={"role": "user", "text": "What is 6*7?"}, actor=admin_actor)
        sessions.session_update(session_id=waiting_session.id, status="paused")
        waiting = Run.objects.create(id=mint_id("run"), agent=asking, agent_name="careful", kind="chat", status="waiting", model="m",
                                     input="What is 6*7?", actor=admin_actor, session_id=waiting_session.id, created_at=now, started_at=now)
        Approval.objects.create(id=mint_id("apr"), run_id=waiting.id, session_id=waiting_session.id, tool_call_id="call_w", tool_name="calculator",
                                arguments=json.dumps({"expression": "6*7", MARKER: 1}), created_at=now)
        asked = Conversation.objects.create(title="What is 6*7? " + RTL[:30], created_by=admin_actor, turns=1, created_at=now, updated_at=now)
        Message.objects.create(conversation=asked, position=1, role="user", content="What is 6*7?", run_id=waiting.id, created_at=now)
        stopped = Conversation.objects.create(title="Count slowly", created_by=admin_actor, turns=2, created_at=now, updated_at=now)
        Message.objects.create(conversation=stopped, position=1, role="user", content="Count slowly " + CJK, created_at=now)
        Message.objects.create(conversation=stopped, position=2, role="assistant", content="one two " + "z" * 90, finish_reason="stopped",
                               created_at=now)
        ids["waiting_conversation"], ids["waiting_session"], ids["stopped_conversation"] = asked.id, waiting_session.id, stopped.id
    # A share link of the finished session (its public page).
    ids["shared"] = post_json(org.client, f"/v1/agents/sessions/{done.id}/shares", {})["url"].split("testserver", 1)[1]
    # Identity agents (one webhook-connected, with deliveries; one in the member's inbox).
    mine = create_agent(org.client, display_name="Invoice Bot", custom_id="invoice_bot", connection_mode="webhook",
                        webhook_url="http://127.0.0.1:9/" + "h" * 60).json()
    both = pair(org.client, org.user.get_username(), mine, webhook=True)
    assert both.send_to_agent("hello " + CJK).status_code == 202
    assert post(org.client, f"/v1/identity/agents/{mine['agent_id']}/relations").status_code == 201
    assert both.send_to_user("hi " + RTL).status_code == 201
    create_agent(org.client, display_name="近所のボット", custom_id="neighbour_" + "n" * 20)
    ids["identity"] = mine["agent_id"]
    # A webhook endpoint with a failed and a delivered delivery.
    endpoint = create_endpoint(org, "http://127.0.0.1:9/hooks/" + "w" * 80, description="ops receiver " + CJK)
    ids["webhook"] = endpoint["id"]
    with org.context():
        from webhooks.models import Endpoint

        row = Endpoint.objects.get(public_id=endpoint["id"])
        for n, status in enumerate(["failed", "delivered"]):
            delivery = EventDelivery.objects.create(
                endpoint=row, public_id=f"msg_crawl{n}", event_id=f"evt_crawl{n}", event_type="run.finished", url=row.url,
                payload=json.dumps({"type": "run.finished", "data": {"runId": "run_1", MARKER: n}}), status=status, attempts=n + 1,
                last_status_code=500 if status == "failed" else 200, last_error="HTTP 500 " + "e" * 120 if status == "failed" else "",
                created_at=now, updated_at=now, delivered_at=now if status == "delivered" else None)
            EventAttempt.objects.create(delivery=delivery, number=1, status_code=delivery.last_status_code, error=delivery.last_error,
                                        response_body='{"' + MARKER + '": 1}', duration_ms=12, created_at=now)
    # A client anomaly (the admin's page) and money on the ledger (the billing page).
    from billing.services import credit_add
    from identity.models import ClientAnomaly

    with org.context():
        ClientAnomaly.objects.create(user_id=org.user.get_username(), kind="endpoint_not_allowed", conversation_id="../x/<b>y</b>" + "z" * 80,
                                     detail={"field": "password", "endpoint": "https://evil.example/" + "p" * 80}, created_at=now)  # shown as name=value pairs, by design
    credit_add(org=org.org, cents=12_345, actor="crawler " + CJK)

    return ids


# --- the checks ------------------------------------------------------------------------------


class Crawler:
    """Visits pages in one browser page and collects every problem found as a line of text."""

    def __init__(self, page, shots: Path | None, who: str):
        self.page, self.shots, self.who = page, shots, who
        self.problems: list[str] = []
        self.current = ""
        self.errors: list[str] = []
        # "Failed to load resource" is Chromium's echo of a 4xx/5xx answer: the response listener
        # reports those (and the page's own expected status is checked by `visit`).
        page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}")
                if m.type == "error" and not m.text.startswith("Failed to load resource") else None)
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        page.on("response", lambda r: self.errors.append(f"resource {r.status}: {r.url}")
                if r.status >= 400 and r.request.resource_type != "document" else None)

    def visit(self, path: str, *, status: int = 200, ready: str | None = None, axe: bool = True) -> None:
        page = self.page
        for viewport in (DESKTOP, PHONE):
            where = f"{self.who} {path} @{viewport['width']}"
            self.errors.clear()
            page.set_viewport_size(viewport)
            response = page.goto(path)
            if response is None or response.status != status:
                self.problems.append(f"{where}: HTTP {response.status if response else None}, expected {status}")
                continue
            try:
                if ready:
                    page.wait_for_selector(ready, state="attached")
                page.wait_for_function("() => !document.body.innerText.includes('Loading…')")
            except PlaywrightTimeout:
                self.problems.append(f"{where}: never finished loading (waited for {ready or 'no Loading…'})")
                continue
            width = page.evaluate("document.documentElement.clientWidth")
            if page.evaluate("document.documentElement.scrollWidth") > width:
                self.problems.append(f"{where}: overflows sideways: {page.evaluate(_OVERFLOWING)}")
            spilling = page.evaluate(_SPILLING)
            if spilling:
                self.problems.append(f"{where}: content spills out of its box: {spilling}")
            if MARKER in page.evaluate("document.body.innerText"):
                self.problems.append(f"{where}: raw JSON shown (the marker key {MARKER} is page text)")
            if axe and viewport is DESKTOP:
                page.add_script_tag(path=str(AXE))
                for violation in page.evaluate(_AXE_RUN):
                    self.problems.append(f"{where}: axe {violation}")
            if self.shots:
                name = (self.who + "-" + (path.strip("/").replace("/", "_").replace("?", "_").replace("=", "-") or "root"))[:120]
                page.screenshot(path=str(self.shots / f"{name}-{viewport['width']}.png"), full_page=True)
            for error in self.errors:
                self.problems.append(f"{where}: {error}")


def _shots() -> Path | None:
    folder = os.environ.get("AGENTS_CRAWL_SCREENSHOTS")
    if not folder:
        return None
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    return path


def test_every_console_page_is_correct_at_desktop_and_phone_widths(browser, console_server, make_org, login, settings):
    from tenancy.services import invitation_create, membership_set

    org = make_org("cr")
    member = membership_set(org=org.org, username="member-" + org.slug, password="pw", is_admin=False)
    ids = _seed(org, member.user, settings)
    _, invite = invitation_create(org=org.org, created_by=org.user, note="for a new colleague " + CJK)
    shots = _shots()
    problems: list[str] = []

    context = browser.new_context(base_url=console_server.url, viewport=DESKTOP, locale="en-US")
    context.set_default_timeout(30_000)
    try:
        page = context.new_page()
        login(page, org)
        crawl = Crawler(page, shots, "admin")
        agent, session, coding, ident = ids["agent"], ids["session"], ids["coding_run"], ids["identity"]
        for path, options in [
            ("/console/", {"ready": "#chart svg, #chart .empty, #chart p"}),
            ("/console/agents/", {}),
            ("/console/agents/new/", {}),
            (f"/console/agents/{agent}/", {}),
            (f"/console/agents/{agent}/edit/", {}),
            (f"/console/agents/{agent}/delete/", {}),
            (f"/console/agents/{agent}/runs/", {}),
            (f"/console/agents/{LONG}/", {}),
            ("/console/runs/", {}),
            ("/console/runs/?kind=coding", {}),
            ("/console/chat/", {}),
            (f"/console/chat/{ids['conversation']}/", {}),
            (f"/console/chat/{ids['waiting_conversation']}/", {"ready": "#chat-waiting .approval[data-state=pending] [data-approve]"}),
            (f"/console/chat/{ids['stopped_conversation']}/", {"ready": "#chat-messages li.assistant.stopped"}),
            (f"/console/sessions/{ids['waiting_session']}/", {"ready": "#approvals-card .approval[data-state=pending] [data-approve]"}),
            ("/console/sessions/", {"ready": "#sessions-table:not([hidden]) tbody tr"}),
            (f"/console/sessions/{session}/", {"ready": "#events li[data-seq='5']"}),
            (f"/console/sessions/{ids['build']}/", {"ready": "#events li[data-seq='4']"}),
            ("/console/approvals/", {}),
            ("/console/identity/", {}),
            ("/console/identity/inbox/", {}),
            ("/console/identity/anomalies/", {}),
            ("/console/identity/keys/", {}),
            ("/console/identity/talk/", {}),
            (f"/console/identity/talk/{ident}/", {}),
            (f"/console/identity/{ident}/deliveries/", {}),
            ("/console/coding/", {}),
            (f"/console/coding/{coding}/", {}),
            ("/console/machines/", {}),
            ("/console/keys/", {}),
            ("/console/billing/", {}),
            ("/console/webhooks/", {}),
            (f"/console/webhooks/{ids['webhook']}/", {}),
            ("/console/members/", {}),
            ("/console/backups/", {}),
            ("/console/sessions/sess_0123abcd/", {"status": 404}),
            ("/builds/", {}),
            (f"/builds/{org.slug}/shop/", {}),
            (f"/builds/{org.slug}/shop/{ids['build']}/", {}),
        ]:
            crawl.visit(path, **options)
        problems += crawl.problems
        # Signed out: the login page, an invitation link, the gallery.
        context.clear_cookies()
        anonymous = Crawler(page, shots, "anonymous")
        anonymous.visit("/console/login/")
        anonymous.visit(f"/console/invite/{invite}/")
        anonymous.visit("/builds/")
        anonymous.visit(ids["shared"], ready="#shared-turns li")
        problems += anonymous.problems

        # A member: the pages whose permissions differ.
        handle = type(org)(org=org.org, slug=org.slug, user=member.user, key="", client=None)
        login(page, handle)
        crawl = Crawler(page, shots, "member")
        for path, options in [
            ("/console/", {"ready": "#chart svg, #chart .empty, #chart p"}),
            ("/console/agents/", {}),
            (f"/console/agents/{agent}/", {}),
            (f"/console/agents/{agent}/edit/", {"status": 403}),
            ("/console/sessions/", {"ready": "#sessions-table:not([hidden]) tbody tr, #sessions-empty:not([hidden])"}),
            (f"/console/sessions/{session}/", {"ready": "#events li[data-seq='5']"}),
            # An admin's run waiting for approval: the request shows, without buttons (issue 57).
            (f"/console/sessions/{ids['waiting_session']}/", {"ready": "#approvals-card .approval[data-state=pending] .waiting-for"}),
            (f"/console/chat/{ids['waiting_conversation']}/", {"ready": "#chat-waiting .approval[data-state=pending] .waiting-for"}),
            ("/console/identity/", {}),
            ("/console/identity/inbox/", {}),
            ("/console/identity/anomalies/", {"status": 403}),
            ("/console/coding/", {}),
            ("/console/keys/", {"status": 403}),
            ("/console/members/", {"status": 403}),
            ("/console/backups/", {"status": 403}),
        ]:
            crawl.visit(path, **options)
        problems += crawl.problems
    finally:
        context.close()
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems)


def test_every_console_page_without_parameters_is_in_the_crawl(admin_client):
    """A new console page joins the crawl: every route without a parameter that answers an org
    admin's GET with an HTML page is one of the crawl's paths (the Backups page landed beside
    the crawl and was missing from it)."""
    from django.urls import URLPattern, reverse

    from console.urls import urlpatterns

    source = Path(__file__).read_text()
    crawled = source[source.index('crawl = Crawler(page, shots, "admin")'):source.index('anonymous = Crawler(page, shots, "anonymous")')]
    missing = []
    for pattern in urlpatterns:
        if not isinstance(pattern, URLPattern) or pattern.pattern.converters:
            continue
        url = reverse(f"console:{pattern.name}")
        response = admin_client.get(url)
        if response.status_code == 200 and response["Content-Type"].startswith("text/html") and f'("{url}"' not in crawled:
            missing.append(url)
    assert missing == []
