"""Reads of the OpenAI-compatible endpoint: the agents a principal may call as models. Org context required."""

from __future__ import annotations

from agents.models import Agent
from agents.selectors import agent_get
from agents_site.errors import NotFound
from agents_site.vocabulary import AgentHosting
from openai_api.errors import ModelNotFound
from tenancy.principal import Principal


def model_list(*, principal: Principal) -> list[Agent]:
    """Return the agents `principal` may call, by name: every agent executed here (not external
    identities, whose brain runs elsewhere), narrowed to the key's allowed agents when it names
    some. One query."""
    agents = Agent.objects.exclude(hosting=AgentHosting.EXTERNAL).order_by("name")
    return [agent for agent in agents if principal.may_use_agent(agent_id=agent.id, agent_name=agent.name)]


def model_get(*, principal: Principal, ref: str, listed_only: bool = True) -> Agent:
    """Return the agent whose name or id is `ref` if `principal` may call it; else raise
    `ModelNotFound` (404 `model_not_found`: unknown, another org's, or not allowed to this key —
    never told apart). With `listed_only` an external agent is not found either (it is not a
    model of this endpoint); without it the caller gets it (and the run lifecycle refuses it,
    409 `agent_external`)."""
    try:
        agent = agent_get(ref=ref)
    except NotFound as exc:
        raise ModelNotFound(ref) from exc
    if not principal.may_use_agent(agent_id=agent.id, agent_name=agent.name):
        raise ModelNotFound(ref)
    if listed_only and agent.hosting == AgentHosting.EXTERNAL:
        raise ModelNotFound(ref)
    return agent
