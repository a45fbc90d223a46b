"""Writes of conversations: record turns, delete, and the per-conversation round lock.

A round holds its conversation from the start of its run to the storing of its reply:
`conversation_claim` (inside the run's starting transaction) and `conversation_release` (with
the reply). Two rounds on one conversation therefore never interleave their turns. A lock whose
run has finished or is gone is free, so a crashed round never blocks its thread. Org context
required throughout.
"""

from __future__ import annotations

import threading
import time

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents_site.vocabulary import ChatRole
from chat.errors import ConversationBusy
from chat.models import Conversation, Message
from chat.selectors import holder_in_flight
from tenancy import stores

# Wakes the rounds of this process waiting for a conversation (`multitaskStrategy: enqueue`);
# rounds of other processes are seen by polling.
released = threading.Condition()


def _append(conversation: Conversation, turns: list[dict], *, run_id: str = "") -> list[Message]:
    """Append `turns` (`{role, content, tool_calls?, prompt?, finish_reason?}`) after the conversation's last message; bump `updated_at`.

    Must run inside an org transaction. Positions come from one UPDATE of the `turns` counter,
    so concurrent appends never share one.
    """
    now = timezone.now()
    if not turns:
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=now)
        return []
    Conversation.objects.filter(pk=conversation.pk).update(turns=F("turns") + len(turns), updated_at=now)
    last = Conversation.objects.filter(pk=conversation.pk).values_list("turns", flat=True).get()
    first = last - len(turns) + 1
    rows = [
        Message(conversation=conversation, position=first + i, role=turn["role"], content=turn["content"],
                tool_calls=turn.get("tool_calls"), prompt=turn.get("prompt"), finish_reason=turn.get("finish_reason", ""),
                run_id=run_id, created_at=now)
        for i, turn in enumerate(turns)
    ]
    Message.objects.bulk_create(rows)
    conversation.turns, conversation.updated_at = last, now
    return rows


def conversation_create(*, title: str, turns: list[dict], actor: str) -> Conversation:
    """Create a conversation titled `title` holding `turns` (`{role, content}`, in order); return it.

    The caller has validated the turns (roles, sizes, credentials). One transaction.
    """
    now = timezone.now()
    with stores.org_atomic():
        conversation = Conversation.objects.create(title=title[:80], created_by=actor[:300], created_at=now, updated_at=now)
        _append(conversation, turns)
    return conversation


def conversation_delete(*, conversation: Conversation) -> None:
    """Delete `conversation` and its turns (its runs stay recorded)."""
    with stores.org_atomic():
        Conversation.objects.filter(pk=conversation.pk).delete()
    with released:
        released.notify_all()


def conversation_open_for_round(*, conversation_id: str | None, title: str, actor: str, run_id: str) -> tuple[Conversation, bool]:
    """Inside a round's starting transaction: return `(conversation, created)` held by run `run_id`.

    An unknown (or another org's, or no) `conversation_id` creates a conversation titled
    `title`. An existing one whose lock is held by a run still in flight raises
    `ConversationBusy` (409, `conversationId`), which rolls the whole start back.
    """
    conversation = None
    if conversation_id:
        conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        now = timezone.now()
        conversation = Conversation.objects.create(title=title[:80], created_by=actor[:300], busy_run_id=run_id,
                                                   created_at=now, updated_at=now)
        return conversation, True
    if conversation.busy_run_id and conversation.busy_run_id != run_id and holder_in_flight(conversation.busy_run_id):
        raise ConversationBusy(conversationId=conversation.id)
    Conversation.objects.filter(pk=conversation.pk).update(busy_run_id=run_id)
    conversation.busy_run_id = run_id
    return conversation, False


def conversation_record_turns(*, conversation: Conversation, turns: list[dict], run_id: str = "") -> list[Message]:
    """Append `turns` to `conversation` (in the caller's transaction, or one of its own); return the rows."""
    with stores.org_atomic():
        return _append(conversation, turns, run_id=run_id)


def conversation_release(*, conversation_id: str, run_id: str, reply: dict | None) -> None:
    """End run `run_id`'s hold on its conversation, storing `reply` (`{role, content, tool_calls}`) first.

    One transaction (inside the caller's, when there is one: a round's reply commits with its
    run's finish, so no other round can find the run finished and the reply missing); a
    conversation deleted meanwhile, or held by another run (the lock was taken over after this
    run was found finished), is left as it is. Waiting rounds are woken once it commits.
    """
    with stores.org_atomic():
        conversation = Conversation.objects.filter(pk=conversation_id).first()
        if conversation is not None:
            if reply is not None:
                _append(conversation, [reply], run_id=run_id)
            Conversation.objects.filter(pk=conversation_id, busy_run_id=run_id).update(busy_run_id="")
    transaction.on_commit(_wake_waiters, using=stores.current_alias())


def _wake_waiters() -> None:
    with released:
        released.notify_all()


def conversation_wait_free(*, conversation_id: str, deadline: float, poll_seconds: float = 0.25) -> bool:
    """Wait until `conversation_id` holds no round in flight, or until `deadline` (monotonic); return True when free.

    Woken at once by a release in this process; a release by another process is seen within
    `poll_seconds`. A conversation that no longer exists counts as free.
    """
    while True:
        held = Conversation.objects.filter(pk=conversation_id).values_list("busy_run_id", flat=True).first()
        if not held or not holder_in_flight(held):
            return True
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        with released:
            released.wait(min(poll_seconds, left))


def conversation_exists(conversation_id: str) -> bool:
    """Return True when `conversation_id` (a string) names a conversation of the current org."""
    return isinstance(conversation_id, str) and Conversation.objects.filter(pk=conversation_id).exists()


def conversation_post_assistant(*, conversation_id: str, text: str, run_id: str = "") -> bool:
    """Append `text` as an assistant turn of `conversation_id` (another run's result); False when it is gone."""
    with stores.org_atomic():
        conversation = Conversation.objects.filter(pk=conversation_id).first()
        if conversation is None:
            return False
        _append(conversation, [{"role": ChatRole.ASSISTANT, "content": text}], run_id=run_id)
    return True
