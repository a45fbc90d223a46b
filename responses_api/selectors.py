"""Reads of the Responses API: stored responses, the items a response continues, kept stream events.

Org context required.
"""

from __future__ import annotations

from agents_site.vocabulary import ChatRole, FinishReason, ResponseStatus, RunStatus
from chat.models import Message
from responses_api.errors import ResponseNotFound
from responses_api.models import ResponseEvent, StoredResponse
from runs.models import Run

#: At most this many earlier responses are walked back through `previous_response_id`.
MAX_CHAIN = 100
CANCELLED_BEFORE_START = "cancelled before start"


def response_get(*, response_id: str, principal=None, param: str = "response_id") -> StoredResponse:
    """Return the org's stored response `response_id`; raise `ResponseNotFound` (404 naming `param`).

    With `principal`, a response of an agent its key may not use is the same 404 (a key limited to
    some agents reads, continues, cancels and deletes only their responses).
    """
    record = StoredResponse.objects.filter(pk=response_id).first() if response_id else None
    if record is not None and principal is not None and principal.allowed_agents:
        agent_id = Run.objects.filter(pk=record.id).values_list("agent_id", flat=True).first() or ""
        if not principal.may_use_agent(agent_id=agent_id, agent_name=record.model):
            record = None
    if record is None:
        raise ResponseNotFound(response_id, param=param)
    return record


def response_run(*, record: StoredResponse) -> Run | None:
    """Return the run of `record` (None when it was deleted with its agent).

    A run found finished has its output items re-read into `record`: they commit with the
    finish, so a row read before it may still hold `[]` (two reads, no snapshot between them).
    """
    run = Run.objects.filter(pk=record.id).first()
    if run is not None and run.status in RunStatus.FINISHED and not record._state.adding:
        record.output_items = StoredResponse.objects.filter(pk=record.id).values_list("output_items", flat=True).first() or []
    return run


def response_status(run: Run) -> str:
    """Return the `ResponseStatus` of a response whose run is `run`.

    queued → `queued`; running / waiting → `in_progress`; ok → `completed`, or `incomplete` when
    the gateway cut the reply (`length`, `content_filter`); error → `cancelled` when a stop
    ended it (before or after start), else `failed`.
    """
    if run.status == RunStatus.QUEUED:
        return ResponseStatus.QUEUED
    if run.status == RunStatus.OK:
        if run.finish_reason in (FinishReason.LENGTH, FinishReason.CONTENT_FILTER):
            return ResponseStatus.INCOMPLETE
        return ResponseStatus.COMPLETED
    if run.status == RunStatus.ERROR:
        if run.finish_reason == FinishReason.STOPPED or (run.error or "").startswith(CANCELLED_BEFORE_START):
            return ResponseStatus.CANCELLED
        return ResponseStatus.FAILED
    return ResponseStatus.IN_PROGRESS


def chain_items(*, record: StoredResponse) -> list[dict]:
    """Return the items response `record` and those before it (`previous_response_id`, at most
    `MAX_CHAIN` back) held, oldest first: each one's input items, then its output items. A
    response deleted in the chain ends the walk (what came before it is no longer known)."""
    chain = []
    current: StoredResponse | None = record
    while current is not None and len(chain) < MAX_CHAIN:
        chain.append(current)
        previous = current.previous_response_id
        current = StoredResponse.objects.filter(pk=previous).first() if previous else None
    items: list[dict] = []
    for held in reversed(chain):
        items.extend(held.input_items)
        items.extend(held.output_items)
    return items


def conversation_items(*, conversation_id: str) -> list[dict]:
    """Return a chat conversation's thread as Responses items, oldest first.

    A turn a stored response posted is replaced by that response's own items (its input and
    output items, with their function calls and outputs); any other turn (a chat round's, an
    A2A task's) becomes a `message` item of its role and text (a `tool` turn is left out: the
    call it answered is not kept).
    """
    responses = {record.id: record for record in StoredResponse.objects.filter(conversation_id=conversation_id)}
    items: list[dict] = []
    seen: set[str] = set()
    for message in Message.objects.filter(conversation_id=conversation_id).order_by("position"):
        record = responses.get(message.run_id)
        if record is not None:
            if record.id not in seen:
                seen.add(record.id)
                items.extend(record.input_items)
                items.extend(record.output_items)
            continue
        if message.role == ChatRole.TOOL:
            continue
        kind = "output_text" if message.role == ChatRole.ASSISTANT else "input_text"
        items.append({"id": message.id, "type": "message", "role": message.role, "status": "completed",
                      "content": [{"type": kind, "text": message.content}]})
    return items


def events_after(*, response_id: str, after: int, limit: int = 500) -> list[dict]:
    """Return the kept stream events of `response_id` whose `sequence_number` is above `after`, in order."""
    rows = ResponseEvent.objects.filter(response_id=response_id, sequence_number__gt=after).order_by("sequence_number")
    return [row.body for row in rows[:limit]]


def events_head(*, response_id: str) -> int:
    """Return the highest kept `sequence_number` of `response_id` (-1 when none is kept)."""
    row = ResponseEvent.objects.filter(response_id=response_id).order_by("-sequence_number").first()
    return row.sequence_number if row is not None else -1
