"""Approvals in the console (issue 28 item 6), in real Chromium on a live daphne: the request shows
on the session page, is edited and approved there; once the run, resumed in another process, ends,
the page says "done" and no longer "live" and the request reads "edited" (issue 57 item 2); the
Approvals page lists it with its answer."""

import httpx
import pytest

from runs.approvals import open_arguments
from runs.models import Approval, Run
from agents_site.vocabulary import ApprovalOutcome, ApprovalState, RunStatus
from tests.support.upstream import Reply

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_request_is_edited_and_approved_on_the_session_page_and_listed_on_the_approvals_page(
        page, make_org, make_agent, login, console_server, upstream_server, upstream):
    org = make_org("ap")
    make_agent(org, "careful", tools=["calculator"], approval={"tools": ["calculator"]})
    upstream_server.script(Reply(tool_calls=[("calculator", {"expression": "2+3"})]))
    api = httpx.Client(base_url=console_server.url, headers={"Authorization": f"Bearer {org.key}"}, timeout=60)
    waiting = api.post("/v1/agents/careful/run", json={"input": "add"})
    assert waiting.status_code == 202, waiting.text
    run_id, session_id = waiting.json()["id"], waiting.json()["sessionId"]

    login(page, org)
    page.goto(f"/console/sessions/{session_id}/")
    page.wait_for_selector("#approvals-card [data-approve]")
    assert page.is_visible("#approvals-card")
    assert '"2+3"' in page.input_value("#approvals-card textarea.approval-args")
    page.fill("#approvals-card textarea.approval-args", '{"expression": "6*7"}')
    page.click("#approvals-card [data-approve]")
    page.wait_for_selector("#approvals-card [data-answer=approved]")
    with org.context():
        row = Approval.objects.get(run_id=run_id)
        # approved, not yet executed: the edited arguments wait sealed (issue 49), never raw
        assert row.state == ApprovalState.APPROVED and row.edited and row.arguments.startswith("sealed:v1:")
        assert open_arguments(row.arguments) == '{"expression": "6*7"}'

    from runs.tasks import resume_run  # the worker's part, inline

    upstream_server.script(Reply(content="forty-two"))
    assert resume_run(org.slug, run_id) == RunStatus.OK
    assert upstream_server.requests[-1]["messages"][-1] == {"role": "tool", "tool_call_id": row.tool_call_id, "content": "42"}
    with org.context():
        assert Run.objects.get(pk=run_id).output == "forty-two"
    # The page still open learns of the end from the store (the resume ran in another process, no
    # Redis): "done", no "● live" (issue 57 item 2), and the request reads how it was answered.
    page.wait_for_selector("#session-status .badge[data-status=done]")
    page.wait_for_function("document.getElementById('stream-state').textContent === ''")
    page.wait_for_selector(f"#approvals-card li[data-tool-call='{row.tool_call_id}'][data-state=done]")
    assert page.get_attribute("#approvals-card .approval .badge", "data-status") == ApprovalOutcome.EDITED
    detail = api.get(f"/v1/agents/runs/{run_id}").json()  # a finished run's detail still lists what it asked
    assert [(a["toolCallId"], a["state"], a["outcome"]) for a in detail["approvals"]] == [(row.tool_call_id, "done", "edited")]

    page.goto("/console/approvals/")
    page.wait_for_selector(f"#approvals-page li[data-tool-call='{row.tool_call_id}']")
    assert page.get_attribute(f"#approvals-page li[data-tool-call='{row.tool_call_id}']", "data-state") == ApprovalState.DONE
    assert page.get_attribute(f"#approvals-page li[data-tool-call='{row.tool_call_id}']", "data-outcome") == ApprovalOutcome.EDITED
    assert page.locator("#approvals-page [data-approve]").count() == 0
