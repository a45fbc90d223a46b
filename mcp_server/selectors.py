"""Reads of the MCP server: the org's agents a caller sees as tools, a session's turns, and the
conversation an earlier call's session continues. Org context required."""

from __future__ import annotations

import json
from dataclasses import dataclass

from agents.models import Agent
from agents.selectors import agent_list
from agents_site.errors import NotFound
from agents_site.vocabulary import EventKind
from chat.models import Message
from mcp_server.access import may_call
from runs.models import Run
from sessions.models import Event, Session
from tenancy.principal import Principal

MAX_TURNS = 200
MAX_ID = 128


class SessionUnknown(NotFound):
    """404: no session by that id for this caller (unknown, another org's, or outside the key's agents)."""

    default_message = "no session by that id"


def tool_agents(*, principal: Principal) -> list[Agent]:
    """Return the agents `principal` may call as tools, by name: the org's agents run here (an
    identity agent's brain runs elsewhere), only the key's agents when it names some. One query."""
    return sorted((a for a in agent_list() if may_call(principal, a)), key=lambda a: a.name)


def session_for(*, principal: Principal, session_id: str) -> Session:
    """Return root session `session_id` of the org if its agent is one `principal` may call;
    raise `SessionUnknown` (404) otherwise — unknown, another org's, a child session, or another
    agent's for a key limited to some agents are never told apart."""
    session_id = (session_id or "").strip()
    session = Session.objects.filter(pk=session_id).first() if 0 < len(session_id) <= MAX_ID else None
    if session is None or session.root_id != session.id:
        raise SessionUnknown(f"no session {session_id[:MAX_ID]!r} in this org")
    if principal.allowed_agents and session.agent not in principal.allowed_agents:
        raise SessionUnknown(f"no session {session_id[:MAX_ID]!r} in this org")
    return session


@dataclass
class Turns:
    """A session's status and its message turns, oldest first: `[{seq, role, text}]` (at most `MAX_TURNS`,
    the newest kept), `more` True when older ones were left out."""

    session: Session
    turns: list[dict]
    more: bool


def session_turns(*, principal: Principal, session_id: str) -> Turns:
    """Return the message turns of session `session_id` (`session_for`'s 404 first). Two queries."""
    session = session_for(principal=principal, session_id=session_id)
    rows = list(Event.objects.filter(session_id=session.id, kind=EventKind.MESSAGE).order_by("-seq")
                .values_list("seq", "payload")[: MAX_TURNS + 1])
    more = len(rows) > MAX_TURNS
    turns = []
    for seq, text in reversed(rows[:MAX_TURNS]):
        payload = _payload(text)
        turns.append({"seq": seq, "role": str(payload.get("role", "")), "text": str(payload.get("text", ""))})
    return Turns(session=session, turns=turns, more=more)


def conversation_of(*, principal: Principal, agent: Agent, session_id: str) -> str:
    """Return the conversation an earlier call's session `session_id` belongs to, for the next call
    to `agent` to continue; raise `SessionUnknown` (404) when the session is not a call of that agent
    this caller may see (a run of another kind, another agent, or none)."""
    session = session_for(principal=principal, session_id=session_id)
    run = Run.objects.filter(session_id=session.id, agent_id=agent.id).only("id").first()
    conversation = (Message.objects.filter(run_id=run.id).values_list("conversation_id", flat=True).first()
                    if run is not None else None)
    if not conversation:
        raise SessionUnknown(f"session {session.id!r} is not a call of agent {agent.name!r}; leave sessionId out to start one")
    return conversation


def _payload(text: str) -> dict:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
