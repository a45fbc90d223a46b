"""Coding runs in a real browser (issue 30 items 2-4): the public build page of a coding run (every
turn, commits under their turns with their diff, summary, branch, head, verify recipe, the
project's other builds), the console's coding page updating while the run works, and a routed
run's page showing what the machine reported, the machine by its label. Pages at 1280 and 390 px.

The coding run executes in this process (real git, bubblewrap, the loopback upstream) and
writes the org's store; the live daphne serves the pages from the same store.
"""

from __future__ import annotations

import threading

import pytest

from coding.sandbox import get_sandbox
from tests.coding.conftest import coding_settings, execute, fund, git, register, remote, start  # noqa: F401  (fixtures)
from tests.support.upstream import Reply

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("coding_settings"),
              pytest.mark.skipif(not get_sandbox().available(), reason="bubblewrap is not installed")]

NARROW = {"width": 390, "height": 844}


@pytest.fixture
def coder(make_org, remote, upstream, settings):  # noqa: F811
    """An org with `acme/shop` registered on the bare `remote`, funded; the live server's pages read it."""
    org = make_org("cb")
    fund(org)
    assert register(org, remote).status_code == 201
    return org


def _fits(page) -> bool:
    """True when nothing makes the page scroll sideways (else print what sticks out)."""
    fits = page.evaluate("document.documentElement.scrollWidth <= document.documentElement.clientWidth + 1")
    if not fits:
        print(page.evaluate("""Array.from(document.querySelectorAll('body *')).filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
            .concat(Array.from(document.querySelectorAll('main *')).filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible'))
            .slice(0, 12).map(e => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right) + ' sw=' + e.scrollWidth + ' cw=' + e.clientWidth)"""))
    return fits


def _coding_run(org, upstream, replies, **body) -> dict:
    upstream.script(*replies)
    response = start(org, **body)
    assert response.status_code == 202, response.content
    return response.json()


def _publish(org, session_id: str) -> None:
    patched = org.client.patch(f"/v1/agents/sessions/{session_id}", {"published": True}, content_type="application/json")
    assert patched.status_code == 200, patched.content


def test_the_build_page_shows_every_turn_and_each_build_has_its_own_page(page, coder, remote, upstream, shoot):  # noqa: F811
    first = _coding_run(coder, upstream, [
        Reply(content="Add the cart", tool_calls=[("write_file", {"path": "cart.py", "content": "def total(xs):\n    return sum(xs)\n"})]),
        Reply(tool_calls=[("run", {"command": "python3 -c 'import cart; print(cart.total([1, 2]))'"})]),
        Reply(tool_calls=[("finish", {"summary": "Cart total works\n\nsums the items"})]),
    ], project="shop")
    assert execute(coder, first["runId"]) == "ok"
    _publish(coder, first["sessionId"])
    second = _coding_run(coder, upstream, [
        Reply(content="Add notes", tool_calls=[("write_file", {"path": "NOTES.md", "content": "n\n"})]),
        Reply(tool_calls=[("finish", {"summary": "Notes added"})]),
    ], project="shop")
    assert execute(coder, second["runId"]) == "ok"
    _publish(coder, second["sessionId"])

    # The gallery lists both builds, each linking to its own page.
    page.goto("/builds/")
    rows = page.locator(f"tr[data-build='{coder.slug}/shop']")
    assert rows.count() == 2
    page.locator(f"tr[data-session='{first['sessionId']}'] a").click()
    page.wait_for_url(f"**/builds/{coder.slug}/shop/{first['sessionId']}/")

    assert page.inner_text("#build-summary .pre") == "Cart total works\n\nsums the items"
    write = page.locator("li[data-kind='tool-call']").filter(has=page.locator("[data-tool='write_file']"))
    assert "cart.py" in write.locator(".tool-args").inner_text()
    assert "wrote cart.py" in write.locator(".tool-result").inner_text()
    commit = write.locator(".commit")  # the commit sits under the turn that made it
    assert commit.locator(".commit-subject").inner_text() == "Add the cart"
    assert "1 file changed" in commit.locator(".diffstat").inner_text()
    commit.locator("summary").click()
    assert "+def total(xs):" in commit.locator(".diff").inner_text()
    run_turn = page.locator("li[data-kind='tool-call']").filter(has=page.locator("[data-tool='run']"))
    assert "3" in run_turn.locator(".tool-result").inner_text() and run_turn.locator(".commit").count() == 0
    assert page.inner_text("#build-branch") == first["branch"]
    head = git("--git-dir", str(remote), "rev-parse", first["branch"]).strip()
    assert page.inner_text("#build-head") == head
    verify = page.inner_text("#verify")
    assert f"git fetch origin +refs/heads/{first['branch']}" in verify and "python3 agents-verify.py" in verify
    assert page.locator("#project-builds li").count() == 2
    assert _fits(page)
    shoot(page, "build-coding")
    page.set_viewport_size(NARROW)
    page.reload()
    assert page.locator(".commit-subject").first.is_visible() and _fits(page)
    shoot(page, "build-coding-narrow")

    # The older build stays reachable; the project's address shows the newest.
    page.locator(f"#project-builds li[data-build-session='{second['sessionId']}'] a").click()
    page.wait_for_url(f"**/builds/{coder.slug}/shop/{second['sessionId']}/")
    assert page.inner_text("#build-summary .pre") == "Notes added"
    assert page.goto(f"/builds/{coder.slug}/shop/").status == 200
    assert page.inner_text("#build-summary .pre") == "Notes added"
    assert page.goto(f"/builds/{coder.slug}/shop/sess_unknown/").status == 404


def test_the_coding_page_updates_while_the_run_works(page, coder, upstream, login, shoot):
    started = _coding_run(coder, upstream, [
        Reply(content="Add a", tool_calls=[("write_file", {"path": "a.txt", "content": "a\n"})]),
        Reply(content="Add b", tool_calls=[("write_file", {"path": "b.txt", "content": "b\n"})], delay=4.0),
        Reply(tool_calls=[("finish", {"summary": "a and b"})], delay=1.0),
    ])
    login(page, coder)
    page.goto(f"/console/coding/{started['runId']}/")
    assert page.inner_text("#coding-commit-count") == "0"
    worker = threading.Thread(target=execute, args=(coder, started["runId"]))
    worker.start()
    try:
        # The first commit appears while the run still works (the second reply is 4 s away).
        page.wait_for_selector(".live-part section[data-commit]", timeout=20_000)
        assert page.get_attribute(".live-part", "data-status") == "running"
        assert page.inner_text(".live-part section[data-commit] h3") == "Add a"
        shoot(page, "coding-live")
        page.wait_for_selector(".live-part[data-status='ok']", timeout=30_000)
    finally:
        worker.join(timeout=60)
    assert page.inner_text("#coding-commit-count") == "2"
    assert page.inner_text("#coding-changed") == "yes" and page.inner_text("#coding-pushed") == "yes"
    assert page.inner_text("#coding-summary") == "a and b"
    assert page.inner_text("#coding-machine") == "this server (bubblewrap)"
    assert _fits(page)
    page.set_viewport_size(NARROW)
    page.reload()
    assert page.locator("#coding-summary").is_visible() and _fits(page)
    shoot(page, "coding-done-narrow")
    # The session page shows the same turns: tool calls, and each commit as a card with its diff.
    page.set_viewport_size({"width": 1280, "height": 860})
    page.goto(f"/console/sessions/{started['sessionId']}/")
    page.wait_for_selector("#events li[data-kind='commit'] .commit-subject")
    assert [t.strip() for t in page.locator("#events li[data-kind='commit'] .commit-subject").all_inner_texts()] == ["Add a", "Add b"]
    assert "1 file changed" in page.inner_text("#events li[data-kind='commit'] .diffstat >> nth=0")
    page.locator("#events li[data-kind='commit'] summary >> nth=0").click()
    assert "+a" in page.inner_text("#events li[data-kind='commit'] .diff >> nth=0")
    assert page.locator("#events li[data-kind='tool-call'] .tool-name code").first.inner_text() == "write_file"


def _off_loop(fn):
    """Call `fn()` on another thread: the claim route is async, and Playwright's loop holds this one."""
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("value", fn()))
    worker.start()
    worker.join(timeout=60)
    return result["value"]


def test_a_routed_run_page_shows_what_the_machine_reported(page, coder, login, settings, shoot):
    from tests.targets.conftest import post as target_post

    def post(*args, **kwargs):
        return _off_loop(lambda: target_post(*args, **kwargs))

    settings.AGENTS_CLAIM_WAIT_SECONDS = 0.2
    target = post(coder.client, "", {"label": "build-box", "host": "bb.local", "spec": {"os": "linux", "sandbox": "bubblewrap"}}).json()
    key = post(coder.client, f"/{target['id']}/key").json()["claimKey"]
    assert post(coder.client, f"/{target['id']}/claim", **{"X-Target-Key": key}).status_code == 204
    started = start(coder, targetId=target["id"]).json()
    assert post(coder.client, f"/{target['id']}/claim", **{"X-Target-Key": key}).status_code == 200
    sid = started["sessionId"]

    def event(kind, payload):
        response = coder.client.post(f"/v1/agents/sessions/{sid}/events", {"kind": kind, "payload": payload}, content_type="application/json")
        assert response.status_code == 201, response.content
        return response.json()["seq"]

    seq = event("tool-call", {"name": "write_file", "arguments": {"path": "x.py"}, "result": "wrote x.py (2 bytes)", "error": False})
    sha = "c0ffee" + "0" * 34
    event("commit", {"text": "Add x", "commit": sha, "subject": "Add x", "diffstat": " x.py | 1 +\n 1 file changed, 1 insertion(+)",
                     "turn": seq, "branch": started["branch"], "patch": "+x\n"})
    reported = post(coder.client, f"/{target['id']}/runs/{started['runId']}/report", {
        "status": "ok", "output": "x added", "summary": "x added", "changed": True, "pushed": True, "branch": started["branch"],
        "commitSha": sha, "diffstat": " x.py | 1 +", "commits": [{"sha": sha, "subject": "Add x", "turn": seq, "diffstat": " x.py | 1 +"}],
    }, **{"X-Target-Key": key})
    assert reported.json() == {"delivered": True}
    api = coder.client.get(f"/v1/agents/coding/{started['runId']}").json()
    assert api["changed"] is True and api["pushed"] is True and [c["sha"] for c in api["commits"]] == [sha]

    login(page, coder)
    page.goto("/console/coding/")
    assert "build-box" in page.inner_text("table") and target["id"] not in page.inner_text("table")
    page.goto(f"/console/coding/{started['runId']}/")
    assert page.inner_text("#coding-machine") == "build-box"
    assert page.inner_text("#coding-changed") == "yes" and page.inner_text("#coding-pushed") == "yes"  # as the API says
    assert page.inner_text("#coding-head") == sha
    assert page.inner_text(".live-part section[data-commit] h3") == "Add x"
    assert page.locator(f"li[data-turn='{seq}'] .commit[data-commit='{sha}']").count() == 1
    assert _fits(page)
    shoot(page, "coding-routed")
    page.set_viewport_size(NARROW)
    page.reload()
    assert _fits(page)
