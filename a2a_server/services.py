"""Writes of the A2A face: start a task, cancel it, list an agent in the public directory.

A task is a run of kind `a2a` started through the one run lifecycle as a conversation round
(`chat.rounds.chat_round_start(kind=a2a)`): recorded, gated, billed on success, with a live
session; its conversation is the A2A `contextId`, so the next message with that `contextId`
continues the same thread (and the console's chat shows it). Cancel is the session's `stop`.
Org context required.
"""

from __future__ import annotations

from django.db import IntegrityError
from django.utils import timezone

from agents.models import Agent
from agents_site.errors import InvalidRequest
from agents_site.vocabulary import AgentHosting, ChatRole, ControlCommand, RunKind
from a2a_server.models import PublicCard
from chat.rounds import RoundStart, chat_round_start
from chat.services import conversation_exists
from runs.lifecycle import AgentExternal
from runs.models import Run
from sessions.control import control_send
from tenancy import stores
from tenancy.principal import Principal

MAX_CONTEXT_ID = 64


def task_start(*, principal: Principal, agent: Agent, text: str, context_id: str = "", request_id: str = "") -> RoundStart:
    """Start the run of one A2A message to `agent`; return the started round (its run `running`).

    In: the caller; the agent; `text`, what the message says (`wire.message_text`);
    `context_id`, the A2A `contextId` — "" starts a new conversation, else it must name one of
    the org's conversations (400 `InvalidRequest` otherwise: a client's own id is not adopted,
    so two clients never share a thread by guessing an id); `request_id` for the run's record.
    Raises what a chat round's start raises, with nothing stored or billed: 400, 404, 409
    `agent_external` / `conversation_busy` (a message of this context is in flight), 402, 422
    `secret_in_transcript`, 503.
    """
    context_id = (context_id or "").strip()
    if context_id and (len(context_id) > MAX_CONTEXT_ID or not conversation_exists(context_id)):
        raise InvalidRequest(f"message.contextId {context_id[:MAX_CONTEXT_ID]!r} names no conversation of this org; "
                             "leave it out to start one", fields=[{"field": "message.contextId", "message": "unknown"}])
    return chat_round_start(actor=principal.actor, messages=[{"role": ChatRole.USER, "content": text}], agent=agent.id,
                            conversation_id=context_id or None, request_id=request_id, subject=principal.subject,
                            kind=RunKind.A2A)


def task_cancel(*, run: Run, actor: str) -> None:
    """Stop task `run` (its session's `stop`, forwarded to whoever executes it; a waiting run ends at
    once). The run ends `error` with `finishReason: stopped` (the task `CANCELED`). Raises
    `SessionFinished` (409) when it ended meanwhile."""
    control_send(session_id=run.session_id, command=ControlCommand.STOP, actor=actor)


def card_list(*, agent: Agent, actor: str) -> bool:
    """List `agent` in the org's public directory; return True when it was not listed before.

    Raises 409 `agent_external` for an identity agent (nothing stored): its card is the manifest it
    signed, read by the org's members only, and the directory would never show it (decision 1556).
    """
    if agent.hosting == AgentHosting.EXTERNAL:
        raise AgentExternal("an identity agent's card is the manifest it signed, for the org's members: "
                            "it is not listed in the public directory")
    if PublicCard.objects.filter(agent_id=agent.id).exists():
        return False
    try:
        with stores.org_atomic():
            PublicCard.objects.create(agent_id=agent.id, listed_by=actor[:300], listed_at=timezone.now())
    except IntegrityError:  # listed by a concurrent call
        return False
    return True


def card_unlist(*, agent: Agent) -> bool:
    """Take `agent` out of the org's public directory; return True when it was listed."""
    deleted, _ = PublicCard.objects.filter(agent_id=agent.id).delete()
    return deleted > 0
