"""Reads of runs: one run, the lists of finished and unfinished runs, counts. Org context required.

Every route, console page and dashboard that lists runs reads them here (issue 48 item 1: the run
reads moved out of `agents.selectors`). An agent given to a selector is an `agents.models.Agent`
row; this app never imports the agents app (`.importlinter`), and resolving an agent from a
caller's `?agent=` stays there (`agents.selectors.run_filter_agent`).
"""

from __future__ import annotations

from django.db import models

from runs.models import Run
from agents_site.errors import InvalidRequest, NotFound
from agents_site.pagination import Page, keyset_page, page_limit
from agents_site.vocabulary import RunKind, RunStatus

#: An `agents.models.Agent` row (runs never imports the agents app).
Agent = models.Model

MAX_ID_LENGTH = 128
HISTORY_DEFAULT_LIMIT = 50
HISTORY_MAX_LIMIT = 200
#: The order of every list of finished runs: newest finish first, the id breaking ties.
FINISHED_ORDER = ("-finished_at", "-id")
#: The order of runs in flight (no `finished_at` yet): newest first by creation.
IN_FLIGHT_ORDER = ("-created_at", "-id")


def run_get(*, run_id: str) -> Run:
    """Return the org's run `run_id` in any status; raise `NotFound` "run not found" (404).

    Spec 003 (background runs): GET /v1/agents/runs/{id} reads one run in flight or finished.
    """
    run_id = (run_id or "").strip()
    run = Run.objects.filter(pk=run_id).first() if 0 < len(run_id) <= MAX_ID_LENGTH else None
    if run is None:
        raise NotFound("run not found")
    return run


def runs_finished_count() -> int:
    """Return how many finished runs the org has, of every kind and agent (agentless coding runs and
    runs of deleted agents included): the rows `runs_finished` pages through unfiltered. One query."""
    return Run.objects.filter(status__in=RunStatus.FINISHED).count()


def run_count(*, agent: Agent) -> int:
    """Return the number of finished runs of `agent`. One query."""
    return Run.objects.filter(agent=agent, status__in=RunStatus.FINISHED).count()


def runs_in_flight(*, kind: str) -> int:
    """Return how many of the org's runs of `kind` are in flight (`queued` or `running`). One query.

    The count a kind's in-flight limit is checked against (`RunPolicy.in_flight_limit`), under the
    org's gate lock in `runs.lifecycle.run_starting`.
    """
    return Run.objects.filter(kind=kind, status__in=RunStatus.IN_FLIGHT).count()


def _run_status(status: str | None) -> str:
    """Return `status` ("" for None); raise `InvalidRequest` (400) unless it is exactly a run
    status, as the OpenAPI document declares (`""` and `" ok"` included)."""
    if status is None:
        return ""
    if status not in RunStatus.values:
        raise InvalidRequest(f"status must be one of {'|'.join(RunStatus.values)}")
    return status


def _run_kind(kind: str | None) -> str:
    """Return `kind` ("" for None); raise `InvalidRequest` (400) unless it is exactly a `RunKind`."""
    if kind is None:
        return ""
    if kind not in RunKind.values:
        raise InvalidRequest(f"kind must be one of {'|'.join(RunKind.values)}")
    return kind


def runs_finished(*, agent: Agent | None = None, status: str | None = None, kind: str | None = None, limit: int | None = None,
                  cursor: str | None = None, actor: str | None = None) -> Page[Run]:
    """Return one page of finished runs of every kind, newest first (`finished_at` desc, id desc) — THE
    list of finished runs every route, console page and dashboard reads.

    `agent` narrows to one agent; `status` (`ok`|`error`, or None for both) to one outcome;
    `kind` (a `RunKind`, 400 otherwise) to one kind; `actor` to the runs that actor started.
    `limit`: None → 50, above 200 → 200, below 1 → `InvalidRequest` (400);
    `cursor`: a `nextCursor` of this list with the same filters (400 otherwise). One query.
    """
    status = _run_status(status)
    if status and status not in RunStatus.FINISHED:
        raise InvalidRequest(f"status must be one of {'|'.join(sorted(RunStatus.FINISHED))}")
    kind = _run_kind(kind)
    queryset = Run.objects.filter(status=status) if status else Run.objects.filter(status__in=RunStatus.FINISHED)
    if agent is not None:
        queryset = queryset.filter(agent=agent)
    if kind:
        queryset = queryset.filter(kind=kind)
    if actor is not None:
        queryset = queryset.filter(actor=actor)
    return keyset_page(
        queryset,
        order=FINISHED_ORDER,
        limit=page_limit(limit, default=HISTORY_DEFAULT_LIMIT, maximum=HISTORY_MAX_LIMIT),
        cursor=cursor,
        tag=f"runs.finished.{kind}" if kind else "runs.finished",
    )


def runs_recent(*, agent: Agent, limit: int = 20) -> list[Run]:
    """Return `agent`'s newest finished runs, newest first, at most `limit` (≤ 200)."""
    return runs_finished(agent=agent, limit=limit).items


def run_list(*, agent: Agent, limit: int | None = None, cursor: str | None = None) -> Page[Run]:
    """Return one page of `agent`'s finished runs, newest first (`limit` default 50, clamped to 200). One query."""
    return runs_finished(agent=agent, limit=limit, cursor=cursor)


def run_list_org(*, status: str | None = None, kind: str | None = None, agent: Agent | None = None, limit: int | None = None,
                 cursor: str | None = None) -> Page[Run]:
    """Return one page of the org's runs across agents, newest first (`limit` default 50, clamped to 200).

    Without `status`, finished runs (`ok` and `error`, by `finished_at`); with `queued`,
    `running` or `waiting` (for approval), the unfinished runs in it (by `created_at`). Every kind
    of run, or only `kind` (a `RunKind`); every agent's runs, or only `agent`'s (see
    `agents.selectors.run_filter_agent`). Raises `InvalidRequest` (400) for any other status or kind,
    a bad limit or a foreign cursor (a cursor belongs to one status, kind and agent). One query.
    """
    status = _run_status(status)
    if status not in RunStatus.UNFINISHED:
        return runs_finished(agent=agent, status=status or None, kind=kind, limit=limit, cursor=cursor)
    kind = _run_kind(kind)
    queryset = Run.objects.filter(status=status)
    if agent is not None:
        queryset = queryset.filter(agent=agent)
    if kind:
        queryset = queryset.filter(kind=kind)
    return keyset_page(
        queryset,
        order=IN_FLIGHT_ORDER,
        limit=page_limit(limit, default=HISTORY_DEFAULT_LIMIT, maximum=HISTORY_MAX_LIMIT),
        cursor=cursor,
        tag=f"runs.{status}.{kind}" if kind else f"runs.{status}",
    )


def run_find(*, run_id: str) -> Run | None:
    """Return the org's run `run_id` in any status, or None (no 404: the caller decides)."""
    return Run.objects.filter(pk=run_id).first()


def run_statuses(*, run_ids: list[str]) -> dict[str, str]:
    """Return `{run id: status}` for those of `run_ids` the org has (one query)."""
    return dict(Run.objects.filter(pk__in=run_ids).values_list("id", "status"))
