"""Reads of the A2A face: a task (a run of kind `a2a`) with its conversation turns, and the public
directory. Org context required unless a function says it opens the store itself."""

from __future__ import annotations

from dataclasses import dataclass

from agents.models import Agent
from agents_site.errors import NotFound
from agents_site.vocabulary import AgentHosting, RunKind
from a2a_server.models import PublicCard
from chat.models import Message
from runs.models import Run
from tenancy import stores

MAX_TASK_ID = 64


@dataclass
class TaskRecord:
    """A task as stored: its run, its conversation's id (the A2A `contextId`) and the turns of this run."""

    run: Run
    context_id: str
    turns: list[Message]


def task_get(*, agent: Agent, task_id: str) -> TaskRecord:
    """Return task `task_id` of `agent`: a run of kind `a2a` of this agent in the current org.

    Raises `NotFound` for anything else — an unknown id, another org's run (not in this store),
    another agent's, or a run that is not an A2A task — never told apart. Two queries.
    """
    task_id = (task_id or "").strip()
    run = Run.objects.filter(pk=task_id, kind=RunKind.A2A, agent_id=agent.id).first() if 0 < len(task_id) <= MAX_TASK_ID else None
    if run is None:
        raise NotFound("task not found")
    turns = list(Message.objects.filter(run_id=run.id).order_by("conversation_id", "position"))
    return TaskRecord(run=run, context_id=turns[0].conversation_id if turns else "", turns=turns)


def is_listed(*, agent: Agent) -> bool:
    """Return True when the org lists `agent` in its public directory."""
    return PublicCard.objects.filter(agent_id=agent.id).exists()


def listed_agents() -> list[Agent]:
    """Return the agents the current org lists in its public directory, by name (executed here
    only: an identity agent's card is its signed manifest, served by the identity API). Two queries."""
    ids = list(PublicCard.objects.values_list("agent_id", flat=True))
    return list(Agent.objects.filter(pk__in=ids).exclude(hosting=AgentHosting.EXTERNAL).order_by("name"))


def public_agents(*, org_slug: str) -> list[Agent]:
    """Return org `org_slug`'s listed agents, opening its store only if it exists (no org context
    needed; an unknown or invalid slug raises `NotFound` and creates nothing)."""
    try:
        with stores.org_context(org_slug, create=False):
            return listed_agents()
    except stores.StoreMissing:
        raise NotFound("no public directory for that org") from None


def public_agent(*, org_slug: str, name: str) -> Agent:
    """Return org `org_slug`'s listed agent `name`; raise `NotFound` for an unknown org, an unknown
    agent or one the org did not list (never told apart). Opens the store itself."""
    for agent in public_agents(org_slug=org_slug):
        if agent.name == name:
            return agent
    raise NotFound("agent not found")
