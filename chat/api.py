"""Routes of the conversation surface: /v1/agents/chat… (spec 000 "The surface", reference §8.1).

Mounted before the agents router so `/{ref}` never shadows `chat`. Thin: parse, call one
service or selector, shape. Route docstrings are the OpenAPI operation descriptions.
"""

from __future__ import annotations

import secrets

from django.http import HttpResponse, JsonResponse
from ninja import Router
from ninja.responses import Status

from runs.hooks import request_callback
from agents.execution import WholeAnswer
from agents.presenters import overflowed, run_view
from runs.streaming import answer_later, run_headers, run_stream
from agents_site.pagination import cursor_param, limit_param
from agents_site.schemas import ErrorOut, sse_frame, stream_schema
from agents_site.vocabulary import ErrorCode, ReplyFrame, RunStatus
from chat import rounds, selectors, services
from chat.errors import RoundFailed, RoundOverflowed
from chat.presenters import conversation_detail_view, conversation_view, preset_view
from chat.presets import preset_list
from chat.schemas import (ChatIn, ChatOut, ChatWaitingOut, ConversationDetailOut, ConversationIn, ConversationListOut, PresetListOut,
                          RoundFailedOut)
from chat.validation import clean_messages, clean_title, refuse_credentials, title_from
from tenancy.principal import require_org
from runs.approvals import approval_view, run_approvals

router = Router(tags=["chat"])

_TEXT = {"type": "string"}
_WITH_RUN = {"run": {"$ref": "#/components/schemas/RunOut"}}
_CHAT_STREAM = stream_schema("ChatStreamFrame", (
    "With `stream: true`: Server-Sent Events while the round runs. First `event: start` `{runId, sessionId, conversationId}` "
    "(to stop it); `delta` `{text}` pieces of the reply (credentials masked); `tool` `{name, args, result|error}` for a tool "
    "executed here; `ops` `{ops}` for calls the client runs; then one `chat` frame (the 200 body plus `run`) or, for a "
    "failed run, one `error` frame (the 502 body plus `run`)."), [
    sse_frame(ReplyFrame.START, {"type": "object", "required": ["runId", "conversationId"],
                                 "properties": {"runId": _TEXT, "sessionId": {"type": ["string", "null"]}, "conversationId": _TEXT}}),
    sse_frame(ReplyFrame.DELTA, {"type": "object", "required": ["text"], "properties": {"text": _TEXT}}),
    sse_frame(ReplyFrame.TOOL, {"type": "object", "required": ["name", "args"],
                                "properties": {"name": _TEXT, "args": {"type": "object"}, "result": _TEXT, "error": _TEXT}}),
    sse_frame(ReplyFrame.OPS, {"type": "object", "required": ["ops"], "properties": {"ops": {"type": "array", "items": {"$ref": "#/components/schemas/OpOut"}}}}),
    sse_frame(ReplyFrame.CHAT, {"allOf": [{"$ref": "#/components/schemas/ChatOut"}, {"type": "object", "required": ["run"], "properties": _WITH_RUN}]}),
    sse_frame(ReplyFrame.ERROR, {"allOf": [{"$ref": "#/components/schemas/ErrorOut"}, {"type": "object", "properties": _WITH_RUN}]}),
    sse_frame(ReplyFrame.APPROVAL, {"$ref": "#/components/schemas/ChatWaitingOut"}),
])
_STREAM = {
    400: {"description": "Invalid request: a parameter or the body failed validation (`invalid_request`, `ErrorOut`); or the "
                         "round's run failed because the prompt is over the model's context window (`context_length_exceeded`, "
                         "with `runId` and `conversationId`)."},
    200: {
        "description": "The round's answer; with `stream: true`, `text/event-stream` (see `ChatStreamFrame`).",
        "content": {"text/event-stream": {"schema": _CHAT_STREAM}},
    }
}


def _request_id(request) -> str:
    given = (request.headers.get("X-Request-Id") or "").strip()
    return given[:128] if given else "req_" + secrets.token_hex(12)


def _failed(start, run) -> RoundFailed | RoundOverflowed:
    if overflowed(run):  # issue 53: a context overflow is the caller's 400 on every surface
        return RoundOverflowed(run.error, runId=run.id, conversationId=start.conversation_id)
    return RoundFailed(run.error or "the run failed", runId=run.id, conversationId=start.conversation_id)


@router.post(
    "",
    response={200: ChatOut, 202: ChatWaitingOut, 400: RoundFailedOut | ErrorOut, 402: ErrorOut, 404: ErrorOut, 409: ErrorOut, 422: ErrorOut, 502: RoundFailedOut, 503: ErrorOut},
    summary="One tool-calling round of a conversation",
    openapi_extra={"responses": _STREAM},
)
def chat(request, payload: ChatIn):
    """Run one round and answer `{reply, actions, ops, conversationId, runId}`.

    The round is a run of kind `chat` (gated, recorded, billed `AGENTS_CHAT_FEE_CENTS`, with a
    live session). `agent` (one of your agents, by name or id) or `preset` (default
    `assistant`) drives it; tools that run here come back as `actions`, calls of your own
    `tools` (and of a client-executed preset's) as `ops` for you to execute. Without
    `conversationId` (or with an unknown one) a new conversation is started. Only the last
    `user` message and the reply are stored.

    400 bad messages (empty: "messages required"; a role outside system/user/assistant/tool;
    content over 128 KiB), a bad tool definition, `agent` with `preset`, an unknown preset;
    422 a credential in any message (nothing stored); 404 unknown agent; 409
    `agent_external`, or `conversation_busy` while a round of the conversation is in flight
    (`multitaskStrategy: enqueue` waits for it instead); 402/503 balance; 503 no inference;
    502 `run_failed` when the run failed (`runId`, `conversationId`; your message stays stored);
    400 `context_length_exceeded` (same extras) when it failed because the prompt is over the model's window
    (with `stream` too: the stream's headers wait for the model's first piece of the reply).
    `webhook`: the round's own `run.finished` callback, a URL under one of the org's webhook
    endpoints (else 400).
    """
    principal = require_org(request.auth)
    tools = [tool.model_dump(exclude_none=True) for tool in payload.tools] if payload.tools is not None else None
    with request_callback(payload.webhook):  # 400 for a URL outside the org's webhook endpoints
        start = rounds.chat_round_start(
            actor=principal.actor, messages=payload.messages, preset=payload.preset, agent=payload.agent, tools=tools,
            system=payload.system, conversation_id=payload.conversationId, multitask_strategy=payload.multitaskStrategy,
            request_id=_request_id(request), subject=principal.subject,
        )
    if payload.stream:
        def work(listener):
            run = yield from rounds.chat_round_steps(start, listener=listener)
            if run.status == RunStatus.WAITING:  # the stream ends with the request to answer (issue 28)
                return ReplyFrame.APPROVAL, _waiting_body(start, run)
            if run.status == RunStatus.OK:
                return ReplyFrame.CHAT, {**rounds.chat_round_body(start, run), "run": run_view(run)}
            return ReplyFrame.ERROR, {**_failed(start, run).body(), "run": run_view(run)}

        def refuse(event, data):  # the overflow before the first frame: the 400 the round without `stream` answers (issue 53)
            if event == ReplyFrame.ERROR and data.get("code") == ErrorCode.CONTEXT_LENGTH_EXCEEDED:
                return JsonResponse({name: value for name, value in data.items() if name != "run"}, status=400)
            return None

        opening = {"runId": start.run.id, "sessionId": start.run.session_id or None, "conversationId": start.conversation_id}
        return run_headers(run_stream(org=principal.org_slug, work=work, start=opening, refuse=refuse), start.run)

    def answer():  # run steps: the wait on the model is on the event loop when the handler serves this request
        run = yield from rounds.chat_round_steps(start, listener=WholeAnswer())  # the gateway asked not streamed (decision 1533)
        if run.status == RunStatus.WAITING:  # the agent asked to approve a tool call (issue 28)
            response = JsonResponse(_waiting_body(start, run), status=202)
            response["Location"] = f"/v1/agents/runs/{run.id}"
            return response
        if run.status != RunStatus.OK:
            raise _failed(start, run)
        return JsonResponse(rounds.chat_round_body(start, run))

    return answer_later(org=principal.org_slug, work=answer)


def _waiting_body(start, run) -> dict:
    """The body of a round whose run waits for approval: the round's body (no reply yet), the
    run, and its `approvals` to answer on the run's session; the reply is added to the
    conversation when the resumed run finishes."""
    rows = getattr(run, "approvals", None)
    return {**rounds.chat_round_body(start, run), "status": run.status, "sessionId": run.session_id,
            "approvals": [approval_view(row, started_by=run.actor) for row in (rows if rows is not None else run_approvals(run_id=run.id))],
            "run": run_view(run)}


@router.get("/presets", response=PresetListOut, auth=None, summary="The built-in presets")
def presets(request):
    """Return `{"presets": [{id, title, systemPrompt, serverExecuted, tools}]}` sorted by id. No credential needed."""
    return {"presets": [preset_view(p) for p in preset_list()]}


@router.get("/conversations", response=ConversationListOut, summary="List the org's conversations", exclude_none=True)
def list_conversations(
    request,
    limit: int = limit_param(default=selectors.CONVERSATIONS_DEFAULT_LIMIT, maximum=selectors.CONVERSATIONS_MAX_LIMIT),
    cursor: str = cursor_param(),
):
    """Return one page of conversations, most recently updated first; `nextCursor` reads the next page."""
    page = selectors.conversation_page(limit=limit, cursor=cursor)
    return {"conversations": [conversation_view(c) for c in page.items], "nextCursor": page.next_cursor}


@router.post("/conversations", response={201: ConversationDetailOut, 422: ErrorOut}, summary="Record turns without a completion",
             exclude_none=True)
def create_conversation(request, payload: ConversationIn):
    """Start a conversation holding `messages` as given (any role, in order) → 201 with it.

    400 a bad message (role, content over 128 KiB) or a title over 80 characters; 422 a
    credential in any message (nothing stored). Nothing is run or billed.
    """
    principal = require_org(request.auth)
    turns = clean_messages(payload.messages, required=False)
    title = clean_title(payload.title)
    refuse_credentials(turns)
    conversation = services.conversation_create(title=title or title_from(turns), turns=turns, actor=principal.actor)
    return Status(201, conversation_detail_view(conversation, selectors.message_list(conversation=conversation)))


@router.get("/conversations/{conversation_id}", response={200: ConversationDetailOut}, summary="Read one conversation",
            exclude_none=True)
def get_conversation(request, conversation_id: str):
    """Return the conversation and its turns, oldest first. Unknown, or another org's: 404."""
    conversation = selectors.conversation_get(conversation_id=conversation_id)
    return conversation_detail_view(conversation, selectors.message_list(conversation=conversation))


@router.delete("/conversations/{conversation_id}", response={204: None}, summary="Delete a conversation")
def delete_conversation(request, conversation_id: str):
    """Delete the conversation and its turns → 204 (its runs stay recorded). Unknown, or another org's: 404."""
    services.conversation_delete(conversation=selectors.conversation_get(conversation_id=conversation_id))
    return HttpResponse(status=204)



