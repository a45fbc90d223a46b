"""The dashboard's numbers come from the selectors the API answers with (issue 34 item 2): the page
and `GET /v1/agents/runs` / `GET /v1/agents/metrics` never disagree."""

import re

import pytest

from tests.console.conftest import signed_in

pytestmark = pytest.mark.django_db


def test_runs_recorded_counts_every_finished_run_the_api_lists(org_a, make_agent, make_runs):
    from runs.models import Run

    helper = make_agent(org_a, "helper")
    make_runs(org_a, helper, 3)
    make_runs(org_a, helper, 2, status="error")
    with org_a.context():
        # A coding run belongs to no agent: the old sum of agents' counts left it out (24 beside a legend of 27).
        Run.objects.filter(pk=make_runs(org_a, helper, 1)[0].pk).update(agent=None, agent_name="coding-dev", kind="coding")
        Run.objects.filter(pk=make_runs(org_a, helper, 1)[0].pk).update(status="running", finished_at=None)  # not finished: not counted
    listed = org_a.client.get("/v1/agents/runs?limit=200").json()["runs"]
    metrics = org_a.client.get("/v1/agents/metrics?range=24h").json()
    in_chart = sum(p["v"] for s in metrics["series"] for p in s["points"])
    html = signed_in(org_a).get("/console/").content.decode()
    shown = int(re.search(r'id="total-runs">(\d+)<', html).group(1))
    assert shown == len(listed) == in_chart == 6
