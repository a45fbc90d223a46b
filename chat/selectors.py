"""Reads of conversations and their turns. Org context required."""

from __future__ import annotations

from django.conf import settings

from runs.models import Run
from agents_site.pagination import Page, keyset_page, page_limit
from agents_site.vocabulary import RunStatus
from chat.errors import ConversationNotFound
from chat.models import Conversation, Message

CONVERSATIONS_DEFAULT_LIMIT = 50
CONVERSATIONS_MAX_LIMIT = 200
MAX_ID_LENGTH = 64


def conversation_find(*, conversation_id: str | None) -> Conversation | None:
    """Return the org's conversation `conversation_id`, or None (unknown, another org's, or malformed)."""
    conversation_id = (conversation_id or "").strip()
    if not conversation_id or len(conversation_id) > MAX_ID_LENGTH:
        return None
    return Conversation.objects.filter(pk=conversation_id).first()


def conversation_get(*, conversation_id: str) -> Conversation:
    """Return the org's conversation `conversation_id`; raise `ConversationNotFound` (404) otherwise."""
    conversation = conversation_find(conversation_id=conversation_id)
    if conversation is None:
        raise ConversationNotFound()
    return conversation


def conversation_page(*, limit: int | None = None, cursor: str | None = None) -> Page[Conversation]:
    """Return one page of the org's conversations, most recently updated first (`updated_at` desc, id desc).

    `limit` default 50, clamped to 200; `cursor` a `nextCursor` of this list (400 otherwise). One query.
    """
    return keyset_page(
        Conversation.objects.all(),
        order=("-updated_at", "-id"),
        limit=page_limit(limit, default=CONVERSATIONS_DEFAULT_LIMIT, maximum=CONVERSATIONS_MAX_LIMIT),
        cursor=cursor,
        tag="chat.conversations",
    )


def message_list(*, conversation: Conversation) -> list[Message]:
    """Return every turn of `conversation`, oldest first. One query."""
    return list(Message.objects.filter(conversation=conversation).order_by("position"))


def thread_tail(*, conversation: Conversation, max_chars: int | None = None) -> list[Message]:
    """Return the newest turns of `conversation` whose contents total at most `max_chars`
    characters (default `AGENTS_CHAT_HISTORY_CHARS`), oldest first: the oldest are dropped first.

    Example: turns of 10, 20 and 30 characters with `max_chars=55` → the last two. One query
    (newest first, stopping at the bound).
    """
    budget = settings.AGENTS_CHAT_HISTORY_CHARS if max_chars is None else max_chars
    kept: list[Message] = []
    if budget <= 0:
        return kept
    used = 0
    for message in Message.objects.filter(conversation=conversation).order_by("-position").iterator(chunk_size=200):
        used += len(message.content)
        if used > budget:
            break
        kept.append(message)
    kept.reverse()
    return kept


def holder_in_flight(run_id: str) -> bool:
    """Return True when run `run_id` (a conversation's lock holder) is queued or running.

    A holder that finished, or whose row is gone (a crashed round, a deleted run), holds nothing.
    """
    return bool(run_id) and Run.objects.filter(pk=run_id, status__in=RunStatus.IN_FLIGHT).exists()
