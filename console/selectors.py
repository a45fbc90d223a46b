"""Reads the console needs beyond the API's selectors (paging). Org context required."""

from __future__ import annotations

from django.core.paginator import Page, Paginator

from agents.models import Agent
from agents_site.vocabulary import RunStatus

RUNS_PER_PAGE = 20


def run_history_page(*, agent: Agent, page_number, per_page: int = RUNS_PER_PAGE) -> Page:
    """Return one page of `agent`'s finished runs, newest first (`per_page` rows, ≥1).

    An out-of-range or malformed `page_number` gives the nearest valid page (first or last),
    like the API's silently-defaulted `limit`; an agent with no runs gives one empty page.
    """
    runs = agent.runs.filter(status__in=RunStatus.FINISHED).order_by("-finished_at", "-id")
    return Paginator(runs, max(1, per_page)).get_page(page_number)
