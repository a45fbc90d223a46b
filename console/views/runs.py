"""The org's runs page: every run of every agent and kind, newest first, filtered like the API.

Reads through `runs.selectors.run_list_org` and `agents.selectors.run_filter_agent`, the selectors behind
`GET /v1/agents/runs`, so a page of this list and a page of the API never disagree.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.shortcuts import redirect, render

from agents import selectors
from runs import selectors as run_selectors
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import RunKind, RunStatus
from console.access import member_required
from console.selectors import RUNS_PER_PAGE

FILTERS = ("status", "kind", "agent")


@member_required
def run_list(request):
    """Show one page of the org's runs (20 rows), with `?status=`, `?kind=`, `?agent=` filters.

    Blank filters mean "any". A filter value the API would refuse (an unknown status, kind or
    agent) answers 400 with the API's own words on the page and no rows; a cursor the list did
    not hand out starts over at the newest page of the same filters.
    """
    filters = {name: (request.GET.get(name) or "").strip() for name in FILTERS}
    query = urlencode({k: v for k, v in filters.items() if v})  # the filters, kept by the pager links
    cursor = request.GET.get("cursor") or None
    error = None
    page = None
    try:
        agent = selectors.run_filter_agent(agent=filters["agent"] or None)
    except InvalidRequest as exc:
        error = exc.message
    else:
        try:
            page = _page(filters, agent, cursor)
        except InvalidRequest as exc:
            if cursor is not None and _filters_pass(filters, agent):
                return redirect(f"{request.path}?{query}")
            error = exc.message
    context = {
        "page": page,
        "error": error,
        "filters": filters,
        "query": query,
        "paged": cursor is not None,
        "filtered": any(filters.values()),
        "statuses": RunStatus.choices,
        "kinds": RunKind.choices,
        "agent_names": [a.name for a in selectors.agent_list()],
        "nav": "runs",
    }
    return render(request, "console/runs.html", context, status=400 if error else 200)


def _page(filters: dict, agent, cursor: str | None):
    return run_selectors.run_list_org(status=filters["status"] or None, kind=filters["kind"] or None, agent=agent,
                                  limit=RUNS_PER_PAGE, cursor=cursor)


def _filters_pass(filters: dict, agent) -> bool:
    """Return True when the filters alone are accepted (so only the cursor was refused)."""
    try:
        _page(filters, agent, None)
    except InvalidRequest:
        return False
    return True
