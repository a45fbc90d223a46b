"""The dashboard: what the org has, and what happened lately."""

from __future__ import annotations

from django.shortcuts import render

from agents import selectors
from runs import selectors as run_selectors
from console.access import member_required
from webhooks import selectors as webhook_selectors


@member_required
def dashboard(request):
    """Show the org's agents at a glance, the invocations chart and the activity feed; to an
    org admin, an alert for each webhook endpoint disabled after failing for 24 h.

    The chart and the feed are drawn by `static/console/dashboard.js` from the JSON API
    (`GET /v1/agents/metrics?range=`, `GET /v1/agents/activity`) with the session cookie.
    "Runs recorded" counts every finished run of the org, as `GET /v1/agents/runs` lists them (its
    selector's count), not the sum of the listed agents' counts, which left out coding runs and
    runs of deleted agents; the chart's legend says how many of them fell in its window.
    """
    agents = selectors.agent_list()
    failing = webhook_selectors.failing_endpoints() if request.principal.is_org_admin else []
    return render(
        request,
        "console/dashboard.html",
        {"agents": agents, "total_runs": run_selectors.runs_finished_count(), "failing_webhooks": failing, "nav": "dashboard"},
    )
