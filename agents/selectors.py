"""Reads of agent definitions. Org context required. (Runs are read by `runs.selectors`.)"""

from __future__ import annotations

from django.db import router
from django.db.models import Count, Q

from agents import queries
from agents.models import Agent
from agents_site.errors import InvalidRequest, NotFound
from agents_site.pagination import Page, keyset_page, page_limit
from agents_site.vocabulary import AgentHosting, RunStatus

MAX_REF_LENGTH = 128


def agent_get(*, ref: str) -> Agent:
    """Return the agent whose id or name is `ref` (id wins); raise `NotFound` (404).

    Another org's agent is not in this store, so it is a 404 exactly like a missing one.
    """
    ref = (ref or "").strip()
    if not ref or len(ref) > MAX_REF_LENGTH:
        raise NotFound("agent not found")
    found = queries.agents_by_id_or_name(ref, alias=router.db_for_read(Agent))  # names are unique
    if not found:
        raise NotFound("agent not found")
    return next((agent for agent in found if agent.pk == ref), found[0])


def agent_list() -> list[Agent]:
    """Return every agent of the org, `updated_at` desc then name, each with `run_count` (the console's list).

    Only finished runs are counted. One query.
    """
    return list(_agents_with_counts().order_by("-updated_at", "name"))


def platform_agent_count() -> int:
    """Return how many platform agents the org has: agents this platform runs (`hosting`
    `platform`), not identity agents (their brain runs on their owner's host). One query."""
    return Agent.objects.exclude(hosting=AgentHosting.EXTERNAL).count()


def _agents_with_counts():
    return Agent.objects.annotate(run_count=Count("runs", filter=Q(runs__status__in=RunStatus.FINISHED)))


AGENTS_DEFAULT_LIMIT = 100
AGENTS_MAX_LIMIT = 500


def agent_page(*, limit: int | None = None, cursor: str | None = None) -> Page[Agent]:
    """Return one page of the org's agents, `updated_at` desc then name (unique), each with `run_count`.

    `limit` 1.. (default 100, clamped to 500); `cursor` a `nextCursor` of this list. Raises
    `InvalidRequest` (400) for a bad limit or cursor. One query.
    """
    return keyset_page(
        _agents_with_counts(),
        order=("-updated_at", "name"),
        limit=page_limit(limit, default=AGENTS_DEFAULT_LIMIT, maximum=AGENTS_MAX_LIMIT),
        cursor=cursor,
        tag="agents",
    )


def run_filter_agent(*, agent: str | None) -> Agent | None:
    """Return the agent a list's `?agent=` names (its id or name), None when absent (for `runs.selectors.run_list_org`).

    Raises `InvalidRequest` (400) "agent must name an agent of this org" for a blank or unknown
    name, or another org's agent: a filter value the caller got wrong, not a missing resource.
    """
    if agent is None:
        return None
    try:
        return agent_get(ref=agent)
    except NotFound as exc:
        raise InvalidRequest("agent must name an agent of this org (its id or name)") from exc
