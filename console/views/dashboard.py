"""The dashboard: what the org has, and what happened lately."""

from __future__ import annotations

from django.shortcuts import render

from agents import selectors
from console.access import member_required
from webhooks import selectors as webhook_selectors


@member_required
def dashboard(request):
    """Show the org's agents at a glance, the invocations chart and the activity feed; to an
    org admin, an alert for each webhook endpoint disabled after failing for 24 h.

    The chart and the feed are drawn by `static/console/dashboard.js` from the JSON API
    (`GET /v1/agents/metrics?range=`, `GET /v1/agents/activity`) with the session cookie.
    """
    agents = selectors.agent_list()
    failing = webhook_selectors.failing_endpoints() if request.principal.is_org_admin else []
    return render(
        request,
        "console/dashboard.html",
        {"agents": agents, "total_runs": sum(a.run_count for a in agents), "failing_webhooks": failing, "nav": "dashboard"},
    )
