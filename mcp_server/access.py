"""Who may call the MCP server: the one access check of its route.

| route | who |
|---|---|
| `POST` / `GET` / `DELETE /v1/agents/mcp` (MCP streamable HTTP) | an API key (scope `all` or `mcp`) or gateway JWT of the org: a bearer credential, no console login (so no CSRF); a key limited to some agents sees and calls only those |

A missing or refused credential is 403 in the one error shape before the protocol starts
(`tenancy.principal`); a key of another scope is refused by the principal middleware the same
way. Inside the protocol an agent that is unknown, another org's, or outside the key's agents is
the same "unknown tool" error, and a session outside them the same "no session" tool error.
"""

from __future__ import annotations

from agents.models import Agent
from agents.selectors import agent_get
from agents_site.errors import NotFound
from agents_site.vocabulary import AgentHosting
from tenancy.authenticate import bearer_principal
from tenancy.principal import Principal


def bearer(request) -> Principal:
    """Return the caller's principal if it came with a bearer credential (API key or gateway JWT) of
    an org; raise 403 `Forbidden` for none, a refused one, or a console login."""
    return bearer_principal(request, face="the MCP server")


def may_call(principal: Principal, agent: Agent) -> bool:
    """Return True when `agent` is a tool for `principal`: run here (not an identity agent's
    `external` brain) and among the key's agents when it names some."""
    return agent.hosting != AgentHosting.EXTERNAL and principal.may_use_agent(agent_id=agent.id, agent_name=agent.name)


def agent_for(principal: Principal, ref: str) -> Agent:
    """Return the org's agent named `ref` if `principal` may call it; raise 404 `NotFound` otherwise
    (unknown, another org's, an identity agent, or outside the key's agents: never told apart).
    Org context required."""
    agent = agent_get(ref=ref)
    if not may_call(principal, agent):
        raise NotFound("agent not found")
    return agent
