"""Approval routes (issue 28): answer a run's tool-call requests on its session, list the org's.

`POST /v1/agents/sessions/{id}/approve` and `…/deny` are steering commands shaped like pause
and stop (recorded as `control` events); `GET /v1/agents/approvals` lists the org's requests,
pending first. Thin: parse, call `runs.approvals`, shape. Mounted before the sessions
router's fallbacks and the agents router (the word `approvals` is therefore a reserved agent name).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict

from ninja import Field, Query, Router, Schema

from runs import approvals
from agents.schemas import ApprovalOut
from agents_site import permissions
from agents_site.schemas import BodySchema, ErrorOut, choice, required_in_docs
from agents_site.vocabulary import ControlCommand
from sessions.schemas import EventOut, SecretErrorOut
from tenancy.principal import require_org

router = Router(tags=["approvals"])

#: A tool call's id as gateways mint them (`call_…`, `toolu_…`, llama.cpp's and Mistral's
#: alphanumerics): no slash, space, markup or direction mark reaches a lookup (issue 29).
TOOL_CALL_ID_PATTERN = r"^[A-Za-z0-9_.:~+=-]{1,128}$"


class ApproveIn(BodySchema):
    """Approve one pending tool call; `arguments` replaces the model's (checked against the tool's schema)."""

    model_config = ConfigDict(json_schema_extra=required_in_docs("toolCallId"))

    # Optional for pydantic (the service answers a missing one with its own 400), required in the document.
    toolCallId: str | None = Field(None, min_length=1, max_length=128, pattern=TOOL_CALL_ID_PATTERN,
                                   description="The `toolCallId` of the pending request (as the gateway named the call).")
    arguments: dict[str, Any] | None = Field(None, description="Edited arguments the tool is called with instead of the model's.")


class DenyIn(BodySchema):
    """Deny one pending tool call; the model receives the denial and `message` as the tool's result."""

    model_config = ConfigDict(json_schema_extra=required_in_docs("toolCallId"))

    # Optional for pydantic (the service answers a missing one with its own 400), required in the document.
    toolCallId: str | None = Field(None, min_length=1, max_length=128, pattern=TOOL_CALL_ID_PATTERN,
                                   description="The `toolCallId` of the pending request (as the gateway named the call).")
    message: str | None = Field(None, description="Why (at most 16 KiB); the model reads it.")


class ApprovalAnswerOut(Schema):
    """The recorded answer: its `control` event, whether the run was handed to a worker to resume, the request now."""

    command: str = choice(ControlCommand, ...)
    event: EventOut
    forwarded: bool = Field(..., description="True when this was the run's last open request: its resume was queued.")
    approval: ApprovalOut


class ApprovalListOut(Schema):
    approvals: list[ApprovalOut]


_ANSWER_RESPONSES = {200: ApprovalAnswerOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: SecretErrorOut}


@router.post("/sessions/{id}/approve", response=_ANSWER_RESPONSES, summary="Approve a pending tool call", exclude_none=True)
def approve(request, id: str, payload: ApproveIn):
    """Approve the tool call `toolCallId` the session's run waits on, optionally with edited `arguments`.

    Who may answer: the user who started the run and the org's admins (403 for anyone else, for
    a key of scope `openai` and for a key whose allowed agents leave the run's agent out). 404
    for an unknown or another org's session or request; 409 `approval_answered` when it was
    already answered (never a second execution); 422 `invalid_arguments` when edited arguments
    do not fit the tool's schema, 422 `secret_in_transcript` when they carry a credential. The
    last answer of a run queues its resume (`forwarded: true`).
    """
    principal = require_org(request.auth)
    return approvals.approval_answer(session_id=id, tool_call_id=payload.toolCallId, principal=principal, approve=True,
                                     arguments=payload.arguments)


@router.post("/sessions/{id}/deny", response=_ANSWER_RESPONSES, summary="Deny a pending tool call", exclude_none=True)
def deny(request, id: str, payload: DenyIn):
    """Deny the tool call `toolCallId` the session's run waits on; the model receives the denial and
    `message` as the tool's result and carries on. Same callers and errors as approve."""
    principal = require_org(request.auth)
    return approvals.approval_answer(session_id=id, tool_call_id=payload.toolCallId, principal=principal, approve=False,
                                     message=payload.message)


@router.get("/approvals", response=ApprovalListOut, summary="The org's approval requests", exclude_none=True)
def list_approvals(request, session: str | None = Query(None, max_length=128, description="Only the requests of this session.")):
    """Return the org's approval requests: pending first (oldest first), then the newest answered; at most 100.
    The org-wide list shows a member the requests of the runs they started (an admin every run's);
    with `session`, the requests of that session (which any member may read, events included)."""
    actor = permissions.own_actor(request.auth) if not session else None
    rows = approvals.approvals_list(session_id=session, actor=actor)
    return {"approvals": approvals.approval_views(rows)}
