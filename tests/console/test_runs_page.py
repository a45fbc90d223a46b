"""The org's runs page (console/views/runs.py): every agent's runs with kind, status and agent
filters, read through the API's own selectors so page and API never disagree (issue 34)."""

from __future__ import annotations

import html
import re

from runs.models import Run
from tests.console.conftest import signed_in


def _row_ids(page: str) -> list[str]:
    return re.findall(r'<tr data-run="([^"]+)"', page)


def test_runs_page_lists_every_agents_runs_newest_first_with_a_kind_column(org_a, admin_client, make_agent, make_runs):
    one, two = make_agent(org_a, "one"), make_agent(org_a, "two")
    runs = make_runs(org_a, one, 2) + make_runs(org_a, two, 1)
    with org_a.context():
        Run.objects.filter(pk=runs[0].pk).update(kind="chat")
    response = admin_client.get("/console/runs/")
    assert response.status_code == 200
    page = response.content.decode()
    assert set(_row_ids(page)) == {r.id for r in runs}
    chat_row = page.split(f'data-run="{runs[0].id}"')[1].split("</tr>")[0]
    assert '<th>Kind</th>' in page and 'class="run-kind">chat round</td>' in chat_row
    assert '<th>Agent</th>' in page and 'href="/console/agents/one/"' in chat_row


def test_runs_page_rows_are_the_apis_page_in_the_same_order(org_a, admin_client, make_agent, make_runs):
    one, two = make_agent(org_a, "one"), make_agent(org_a, "two")
    make_runs(org_a, one, 3)
    make_runs(org_a, two, 4, status="error")
    for query in ("", "?status=error", "?agent=one", "?kind=run&agent=two"):
        api = org_a.client.get(f"/v1/agents/runs{query}{'&' if query else '?'}limit=20").json()["runs"]
        page = admin_client.get(f"/console/runs/{query}").content.decode()
        assert _row_ids(page) == [r["id"] for r in api], query


def test_runs_page_filters_by_kind_status_and_agent(org_a, admin_client, make_agent, make_runs):
    one, two = make_agent(org_a, "one"), make_agent(org_a, "two")
    ones = make_runs(org_a, one, 2)
    twos = make_runs(org_a, two, 2, status="error")
    with org_a.context():
        Run.objects.filter(pk=ones[1].pk).update(kind="scheduled")
    assert _row_ids(admin_client.get("/console/runs/?agent=one").content.decode()) == [ones[1].id, ones[0].id]
    assert _row_ids(admin_client.get("/console/runs/?status=error").content.decode()) == [twos[1].id, twos[0].id]
    page = admin_client.get("/console/runs/?kind=scheduled").content.decode()
    assert _row_ids(page) == [ones[1].id]
    assert '<option value="scheduled" selected>' in page and "Clear filters" in page


def test_runs_page_pages_with_the_lists_cursor_and_keeps_the_filters(org_a, admin_client, make_agent, make_runs):
    one, two = make_agent(org_a, "one"), make_agent(org_a, "two")
    ones = make_runs(org_a, one, 22)
    make_runs(org_a, two, 3)
    first = admin_client.get("/console/runs/?agent=one").content.decode()
    assert _row_ids(first) == [r.id for r in reversed(ones)][:20]
    older = html.unescape(re.search(r'href="\?([^"]+)" rel="next"', first).group(1))
    assert older.startswith("agent=one&cursor=")
    second = admin_client.get(f"/console/runs/?{older}").content.decode()
    assert _row_ids(second) == [ones[1].id, ones[0].id]


def test_runs_page_with_an_unknown_filter_says_why_in_the_apis_words(org_a, admin_client, make_agent):
    make_agent(org_a, "one")
    for query, api_query in (("?agent=ghost", "?agent=ghost"), ("?kind=bogus", "?kind=bogus"), ("?status=weird", "?status=weird")):
        response = admin_client.get(f"/console/runs/{query}")
        assert response.status_code == 400
        api = org_a.client.get(f"/v1/agents/runs{api_query}").json()["error"]
        assert response.context["error"] == api
        assert 'id="runs-error"' in response.content.decode() and not _row_ids(response.content.decode())


def test_runs_page_with_a_foreign_cursor_starts_over_at_the_newest_page(org_a, admin_client, make_agent, make_runs):
    make_runs(org_a, make_agent(org_a, "one"), 1)
    response = admin_client.get("/console/runs/?agent=one&cursor=nope")
    assert response.status_code == 302 and response["Location"] == "/console/runs/?agent=one"


def test_runs_page_shows_a_stop_as_stopped_and_a_cut_reply_as_truncated(org_a, admin_client, make_agent, make_runs):
    stopped, cut, plain = make_runs(org_a, make_agent(org_a, "one"), 3)
    with org_a.context():
        Run.objects.filter(pk=stopped.pk).update(status="error", finish_reason="stopped", error="stopped by the user")
        Run.objects.filter(pk=cut.pk).update(finish_reason="length")
    page = admin_client.get("/console/runs/").content.decode()
    row = lambda run: page.split(f'data-run="{run.id}"')[1].split("</tr>")[0]  # noqa: E731
    assert 'data-status="stopped"' in row(stopped) and 'data-status="error"' not in row(stopped)
    assert 'data-finish="length"' in row(cut) and "✂ truncated" in row(cut)
    assert 'data-status="ok"' in row(plain) and "truncated" not in row(plain)


def test_runs_page_dates_are_local_time_elements_with_the_iso_timestamp(org_a, admin_client, make_agent, make_runs):
    run = make_runs(org_a, make_agent(org_a, "one"), 1)[0]
    page = admin_client.get("/console/runs/").content.decode()
    iso = run.finished_at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert f'<time datetime="{iso}" title="{iso}" data-local>' in page


def test_empty_runs_page_says_so_and_a_member_may_read_it(member):
    response = signed_in(member).get("/console/runs/")
    assert response.status_code == 200
    assert "No runs yet" in response.content.decode()


def test_runs_page_needs_a_login(client):
    response = client.get("/console/runs/")
    assert response.status_code == 302 and "/console/login/" in response["Location"]
