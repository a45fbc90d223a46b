"""Who may call the A2A face: the one access check of its routes.

| route | who |
|---|---|
| `GET  /v1/agents/{ref}/a2a/.well-known/agent-card.json` | any member of the agent's org (API key, gateway JWT, console login); a key limited to some agents only for those |
| `POST /v1/agents/{ref}/a2a` (JSON-RPC) | an API key or gateway JWT of the agent's org (a bearer credential: no console login, so no CSRF); a key limited to some agents only for those |
| `GET  /v1/agents/{ref}/a2a/public` | any member, as above |
| `PUT` / `DELETE /v1/agents/{ref}/a2a/public` | an org admin |
| `GET  /v1/agents/a2a/public/{org}` and `…/{org}/{name}/.well-known/agent-card.json` | anyone, no credential (only agents the org listed) |

An agent that is unknown, another org's, or outside the key's allowed agents is the same 404.
A missing or refused credential is 403 in the one error shape, as everywhere on the API
(`tenancy.principal`); a JSON-RPC error is the protocol's own object, answered with HTTP 200.
"""

from __future__ import annotations

from agents.models import Agent
from agents.selectors import agent_get
from agents_site.errors import Forbidden, NotFound
from tenancy.authenticate import bearer_principal, org_principal
from tenancy.principal import Principal


def member(request) -> Principal:
    """Return the caller's principal acting for an org (any credential); raise 403 `Forbidden` (`tenancy.authenticate`)."""
    return org_principal(request)


def bearer(request) -> Principal:
    """Return the caller's principal if it came with a bearer credential (API key or gateway JWT);
    raise 403 for none, a refused one, or a console login (the JSON-RPC endpoint takes no cookie)."""
    return bearer_principal(request, face="the A2A endpoint")


def admin(request) -> Principal:
    """Return the caller's principal if it is an org admin; raise 403 otherwise."""
    principal = member(request)
    if not principal.is_org_admin:
        raise Forbidden("only an org admin lists or unlists an agent in the public directory")
    return principal


def agent_for(principal: Principal, ref: str) -> Agent:
    """Return the org's agent `ref` (name or id) if `principal` may use it; raise 404 `NotFound`
    otherwise (unknown, another org's, or outside the key's allowed agents: never told apart).
    Org context required."""
    agent = agent_get(ref=ref)
    if not principal.may_use_agent(agent_id=agent.id, agent_name=agent.name):
        raise NotFound("agent not found")
    return agent
