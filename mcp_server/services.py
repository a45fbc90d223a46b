"""Writes of the MCP server: start one tool call's run, stop a session.

A tool call is a run of kind `mcp` started through the one run lifecycle as a conversation round
(`chat.rounds.chat_round_start(kind=mcp)`): recorded, gated, billed on success, with a live
session; a call with `sessionId` (an earlier call's) continues that call's conversation, so the
agent sees the thread. Stop is the session's `stop`. Org context required.
"""

from __future__ import annotations

from agents.models import Agent
from agents_site.vocabulary import ChatRole, ControlCommand, RunKind
from chat.rounds import RoundStart, chat_round_start
from mcp_server.selectors import conversation_of, session_for
from sessions.control import control_send
from tenancy.principal import Principal


def call_start(*, principal: Principal, agent: Agent, text: str, session_id: str = "", request_id: str = "") -> RoundStart:
    """Start the run of one call of `agent`'s tool; return the started round (its run `running`).

    In: the caller; the agent (`access.agent_for`); `text`, the tool's `input`; `session_id`, an
    earlier call's `sessionId` ("" starts a new conversation; one that is not a call of this agent
    the caller may see is 404 `SessionUnknown`); `request_id` for the run's record.
    Raises what a chat round's start raises, with nothing stored or billed: 400 (empty input), 404,
    409 `conversation_busy` (a call of that conversation is in flight), 402, 422
    `secret_in_transcript`, 503.
    """
    conversation = conversation_of(principal=principal, agent=agent, session_id=session_id) if session_id else None
    return chat_round_start(actor=principal.actor, messages=[{"role": ChatRole.USER, "content": text}], agent=agent.id,
                            conversation_id=conversation, request_id=request_id, subject=principal.subject,
                            kind=RunKind.MCP)


def session_stop(*, principal: Principal, session_id: str) -> str:
    """Stop session `session_id` (its `stop`, forwarded to whoever executes its run; a run waiting
    for approval ends at once); return the session's id. Raises `SessionUnknown` (404) for a session
    the caller may not see, `SessionFinished` (409) when it has ended."""
    session = session_for(principal=principal, session_id=session_id)
    control_send(session_id=session.id, command=ControlCommand.STOP, actor=principal.actor)
    return session.id
