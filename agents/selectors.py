"""Reads of agent definitions and runs. Org context required."""

from __future__ import annotations

from django.db.models import Count, Q

from agents.models import Agent, Run
from agents_site.errors import NotFound
from agents_site.vocabulary import RunStatus

MAX_REF_LENGTH = 128


def agent_get(*, ref: str) -> Agent:
    """Return the agent whose id or name is `ref` (id wins); raise `NotFound` (404).

    Another org's agent is not in this store, so it is a 404 exactly like a missing one.
    """
    ref = (ref or "").strip()
    if not ref or len(ref) > MAX_REF_LENGTH:
        raise NotFound("agent not found")
    by_id = Agent.objects.filter(pk=ref).first()
    if by_id is not None:
        return by_id
    by_name = Agent.objects.filter(name=ref).first()
    if by_name is None:
        raise NotFound("agent not found")
    return by_name


def agent_list() -> list[Agent]:
    """Return every agent of the org, `updated_at` desc then name, each with `run_count`.

    Only finished runs are counted. One query.
    """
    return list(
        Agent.objects.annotate(run_count=Count("runs", filter=Q(runs__status__in=RunStatus.FINISHED))).order_by(
            "-updated_at", "name"
        )
    )


def run_get(*, run_id: str) -> Run:
    """Return the org's run `run_id` in any status; raise `NotFound` "run not found" (404).

    Spec 003 (background runs): GET /v1/agents/runs/{id} reads one run in flight or finished.
    """
    run_id = (run_id or "").strip()
    run = Run.objects.filter(pk=run_id).first() if 0 < len(run_id) <= MAX_REF_LENGTH else None
    if run is None:
        raise NotFound("run not found")
    return run


def run_count(*, agent: Agent) -> int:
    """Return the number of finished runs of `agent`."""
    return agent.runs.filter(status__in=RunStatus.FINISHED).count()


def runs_recent(*, agent: Agent, limit: int = 20) -> list[Run]:
    """Return `agent`'s newest finished runs, newest first, at most `limit`."""
    return list(agent.runs.filter(status__in=RunStatus.FINISHED).order_by("-finished_at", "-id")[:limit])


HISTORY_DEFAULT_LIMIT = 50
HISTORY_MAX_LIMIT = 200


def history_limit(limit: int | None) -> int:
    """Return `limit` if it is 1..200, else the default 50 (out of range is never a 400)."""
    return limit if isinstance(limit, int) and 1 <= limit <= HISTORY_MAX_LIMIT else HISTORY_DEFAULT_LIMIT


def run_list(*, agent: Agent, limit: int | None = None) -> list[Run]:
    """Return `agent`'s finished runs, newest first, at most `limit` (1..200, default 50). One query."""
    return list(agent.runs.filter(status__in=RunStatus.FINISHED).order_by("-finished_at", "-id")[: history_limit(limit)])


def run_list_org(*, status: str | None = None, limit: int | None = None) -> list[Run]:
    """Return the org's runs across agents, newest first, at most `limit` (1..200, default 50).

    Without `status`, finished runs (`ok` and `error`); with one of the run statuses, only
    runs in it (`queued`/`running` list runs in flight). Raises `InvalidRequest` for any other
    status. One query.
    """
    from agents_site.errors import InvalidRequest

    if status is not None and status not in RunStatus.values:  # exactly a word, as documented ("" too)
        raise InvalidRequest(f"status must be one of {'|'.join(RunStatus.values)}")
    qs = Run.objects.filter(status=status) if status else Run.objects.filter(status__in=RunStatus.FINISHED)
    order = ("-finished_at", "-id") if status in (None, *RunStatus.FINISHED) else ("-created_at", "-id")
    return list(qs.order_by(*order)[: history_limit(limit)])
