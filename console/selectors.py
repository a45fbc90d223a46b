"""Reads the console needs beyond the API's selectors (paging). Org context required."""

from __future__ import annotations

from agents.models import Agent
from runs.models import Run
from runs.selectors import runs_finished
from agents_site.pagination import Page

RUNS_PER_PAGE = 20


def run_history_page(*, agent: Agent, cursor: str | None, per_page: int = RUNS_PER_PAGE) -> Page[Run]:
    """Return one page of `agent`'s finished runs, newest first (`per_page` rows), after `cursor`.

    The same keyset list as `GET /v1/agents/{ref}/runs` (`runs.selectors.runs_finished`), so
    a page never repeats or skips a run while new runs finish. Raises `InvalidRequest` for a
    cursor that list did not hand out.
    """
    return runs_finished(agent=agent, limit=per_page, cursor=cursor or None)
